#!/usr/bin/env node
// refdev: a reference third-party implementation of the development server's trace, raw log,
// hook receipt, guard and host-session routes, written from the seed document alone
// (../shared/seeds/000: "Development Server HTTP Interface") in Node.js with its standard
// library only. It exists to show that the conformance kit judges an implementation by what the
// seed states, not by our own server's choices: wherever the seed says "not shown" it decides
// for itself (the decisions are listed below and declared in target.toml beside this file).
//
//   node server.mjs [--port N] [--project DIR] [--ready FILE]
//
// It binds 127.0.0.1 only (port 0: any free one), and once listening writes FILE (atomically)
// as JSON {url, port, session, receiptToken, receiptHeader, endpointFile, pid} and prints
// "refdev listening on URL" to stdout. It writes DIR/.bundle/hook-receipts.json (mode 0600,
// {endpoint, token, header}) and removes it on SIGTERM or SIGINT, ending every host session.
//
// It serves nothing else: no route invocations, runtime runs, MCP routes or Workbench page (their
// paths answer 404 refdev.not-found, behind the guard).
//
// Its own choices where the seed leaves things open:
// - Errors: an RFC 7807-style object served as application/json:
//   {type: "urn:refdev:problem:<slug>", title, status, code, detail}. `code` is the seed's code
//   where the seed names one (AB8261..AB8266), else its own "refdev.*" code.
//   Statuses: 400 malformed path, query or cursor; 401 no or wrong session / receipt token;
//   403 foreign Origin, non-loopback peer, Origin on the receipt route; 404 unknown path or
//   session (AB8262); 405 method (with Allow); 409 cursor ahead, or a session not in a state
//   the request needs (AB8261); 413 body too large; 415 not application/json; 421 a Host that is
//   not this server's loopback authority; 422 a body that breaks its schema (AB8261, or
//   refdev.receipt.invalid), an unknown BUNDLE_DEV_SESSION (AB8266); 424 a host kind with no
//   executable (AB8263); 429 four sessions already active (AB8264); 502 the host process could
//   not be spawned (AB8263); 503 closing (refdev.closed, or AB8265 on the session routes).
// - Browser guard, in this order: Host (127.0.0.1, localhost or [::1] with this port), then
//   Origin (absent, or http:// one of those), then the session: header `x-bundle-session: VALUE`
//   or cookie `refdev_sid=VALUE`. The value is issued only through the ready file.
// - Trace: entries numbered 1, 2, ... with no hole; the newest 1000 are kept. The stream's
//   frames are {type: "entry", entry}, the seed's TraceReplayGap object as-is, and
//   {type: "idle", at} every 10 s while nothing else is sent.
// - Raw logs: a record is {seq, at, level, topic, text, context, link?}; the replay is
//   {replay: {records, cursor, skipped?: {count, firstKept, requestedAfter}}} (cursor: the
//   newest seq, the next `after`); stream frames are {record}, {skipped} and {idle: at}.
//   The newest 2000 records are kept. The cursor rules are the trace's.
// - Receipts: header `X-Hook-Receipt-Token: TOKEN`; Host must be exactly 127.0.0.1:PORT or
//   [::1]:PORT (the seed's "exact origin" rule), any Origin is refused, the peer must be
//   loopback. The body (at most 16 KiB; refused at once from its Content-Length, or as soon as
//   a chunked body passes the limit, and the connection closed) is
//   {v: 1, execution: EventTraceExecution, kernel: [{kind, phase, sequence, at, wallStart,
//   ...the kind's extra fields}], identity: {host, sessionId, requestId?, correlationId?,
//   devSession?}, lineage}; unknown keys are refused. `identity.devSession` carries the
//   BUNDLE_DEV_SESSION value: it must name a host session this server started (AB8266).
//   Each accepted receipt becomes one trace entry (source "hook", kind "receipt.<event>").
// - Host sessions: no pseudo-terminal (Node's standard library has none, so AB8260 never
//   arises; the seed fixes no behaviour a pipe cannot show but the bytes' origin): host_a runs
//   `/bin/sh -c` with an echo loop on pipes; its stdout and stderr bytes are the "output";
//   cols and rows are recorded and given to it as COLUMNS and LINES. host_b is never
//   launchable. States are "active" and "ended"; timestamps are epoch milliseconds; an ended
//   session always has endedAt and exitCode (128 + the signal's number when a signal ended
//   it) and also `signal` when one did. authority is {projectRoot, epochId, destination}.
//   A host process gets BUNDLE_DEV_SESSION (its session id), REFDEV_RECEIPT_URL and
//   REFDEV_RECEIPT_TOKEN. Terminate sends SIGTERM to its process group (SIGKILL after 3 s)
//   and answers once it has ended; restart ends the old one first; a resize emits `state`.
//   Session routes take no query, and their bodies must be application/json.
//
// REFDEV_BREAK (comma-separated) makes it break one seed rule on purpose, for the kit's tests:
//   open-sessions  the host-session routes accept requests without the session value
//   trace-holes    trace sequences skip a number now and then
//   receipt-origin the receipt route accepts requests carrying an Origin header
//   no-cap         a fifth active host session is started

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: options } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    project: { type: 'string' },
    ready: { type: 'string' },
  },
});
const BREAK = new Set((process.env.REFDEV_BREAK || '').split(',').filter(Boolean));
const PROJECT = path.resolve(options.project || fs.mkdtempSync(path.join(os.tmpdir(), 'refdev-')));

const KIB = 1024;
const RECEIPT_LIMIT = 16 * KIB;
const INPUT_LIMIT = 16 * KIB;
const SESSION_BODY_LIMIT = 128 * KIB; // 16 KiB of text, JSON-escaped
const OUTPUT_KEPT = 256 * KIB;
const ACTIVE_CAP = 4;
const TRACE_KEPT = 1000;
const LOGS_KEPT = 2000;
const SSE_KEEPALIVE_MS = 15000;
const NDJSON_IDLE_MS = 10000;
const STREAM_BACKLOG = 1024 * KIB; // a subscriber further behind than this is dropped
const SESSION_ID = /^hs_[0-9a-z]{16}$/;
const CURSOR = /^(0|[1-9][0-9]*)$/;
const EPOCH_ID = 'refdev-epoch-1';
const SESSION_VALUE = crypto.randomBytes(32).toString('base64url');
const RECEIPT_TOKEN = crypto.randomBytes(32).toString('base64url');
const RECEIPT_HEADER = 'x-hook-receipt-token';
const COOKIE = 'refdev_sid';

const FAMILIES = new Set(
  ('session/start tool/before tool/after stop agent/start agent/stop workspace/open session/end ' +
    'prompt/submit tool/failure compact/before compact/after permission/request ' +
    'permission/denied stop/failure file/change config/change task/create task/complete ' +
    'agent/idle model-switch/before model-switch/after').split(' '),
);
// kind -> [phase (null: any), extra keys allowed]
const KERNEL_KINDS = {
  'handler.start': ['handler', []],
  'handler.outcome': ['handler', ['outcome', 'durationMs']],
  'execute.start': ['execute', ['runtime']],
  'providers.start': ['providers', []],
  'providers.finish': ['providers', ['count', 'durationMs']],
  'render.start': ['render', []],
  'render.finish': ['render', ['durationMs']],
  failure: [null, ['error', 'durationMs']],
};
const PHASES = new Set(['handler', 'execute', 'providers', 'render']);
const IDENTITY_KEYS = ['host', 'sessionId', 'requestId', 'correlationId', 'devSession'];

let port = 0;
let closing = false;

// -- replayable, numbered histories (trace entries, log records) ----------------------------------

class History {
  constructor(key, kept) {
    this.key = key;
    this.kept = kept;
    this.items = [];
    this.latest = 0;
    this.listeners = new Set();
  }

  publish(make) {
    if (this.key === 'sequence' && BREAK.has('trace-holes') && this.latest % 3 === 2) {
      this.latest += 1;
    }
    const item = make(++this.latest);
    this.items.push(item);
    if (this.items.length > this.kept) this.items.shift();
    for (const listener of this.listeners) listener(item);
    return item;
  }

  firstKept() {
    return this.items.length ? this.items[0][this.key] : this.latest + 1;
  }

  // {items, dropped} after `after`; dropped counts the items after `after` no longer kept.
  since(after) {
    const first = this.firstKept();
    const dropped = after < first - 1 ? first - 1 - after : 0;
    return { items: this.items.filter((item) => item[this.key] > after), dropped, first };
  }
}

const trace = new History('sequence', TRACE_KEPT);
const logs = new History('seq', LOGS_KEPT);

function traceEntry(fields) {
  return trace.publish((sequence) => ({
    id: `te_${sequence.toString(36).padStart(8, '0')}`,
    sequence,
    occurredAt: new Date().toISOString(),
    ...fields,
  }));
}

const LOG_CONTEXT = ['host', 'session', 'requestId', 'executionId', 'correlationId', 'code'];

function log(level, topic, text, context = {}) {
  const kept = {};
  for (const key of LOG_CONTEXT) {
    if (typeof context[key] === 'string' || typeof context[key] === 'number') {
      kept[key] = context[key];
    }
  }
  return logs.publish((seq) => {
    const record = { seq, at: new Date().toISOString(), level, topic, text, context: kept };
    if (typeof kept.correlationId === 'string') {
      record.link = `/trace?correlation=${encodeURIComponent(kept.correlationId)}`;
    }
    return record;
  });
}

// -- replies --------------------------------------------------------------------------------------

const SLUGS = {
  400: 'bad-request', 401: 'unauthenticated', 403: 'forbidden', 404: 'not-found',
  405: 'method-not-allowed', 409: 'conflict', 413: 'too-large', 415: 'media-type',
  421: 'misdirected', 422: 'unprocessable', 424: 'unavailable-host', 429: 'too-many',
  502: 'spawn-failed', 503: 'closed',
};

function baseHeaders(extra = {}) {
  return {
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    ...extra,
  };
}

function sendJson(res, status, value, extra = {}) {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, baseHeaders({
    'Content-Type': 'application/json',
    'Content-Length': body.length,
    ...extra,
  }));
  res.end(body);
}

function sendEmpty(res, status) {
  res.writeHead(status, baseHeaders());
  res.end();
}

class Problem extends Error {
  constructor(status, code, detail, headers = {}) {
    super(detail);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

function sendProblem(res, problem) {
  const slug = SLUGS[problem.status] || 'error';
  const body = {
    type: `urn:refdev:problem:${slug}`,
    title: http.STATUS_CODES[problem.status] || 'Error',
    status: problem.status,
    code: problem.code,
    detail: problem.message,
  };
  sendJson(res, problem.status, body, problem.headers);
}

const fail = (status, code, detail, headers) => {
  throw new Problem(status, code, detail, headers);
};

// -- request reading ------------------------------------------------------------------------------

function splitTarget(raw) {
  const at = raw.indexOf('?');
  return at < 0 ? [raw, ''] : [raw.slice(0, at), raw.slice(at + 1)];
}

function readBody(req, res, limit, code) {
  return new Promise((resolve, reject) => {
    const declared = req.headers['content-length'];
    const tooLarge = () => {
      res.setHeader('Connection', 'close');
      reject(new Problem(413, code, `the body is larger than ${limit} bytes`));
    };
    if (declared !== undefined && Number(declared) > limit) {
      tooLarge();
      return;
    }
    const chunks = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        req.pause();
        tooLarge();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!done) {
        done = true;
        resolve(Buffer.concat(chunks));
      }
    });
    req.on('error', (error) => {
      if (!done) {
        done = true;
        reject(error);
      }
    });
  });
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function isJsonType(req) {
  const type = (req.headers['content-type'] || '').split(';')[0].trim().toLowerCase();
  return type === 'application/json';
}

async function readJsonObject(req, res, limit, code, invalidStatus) {
  if (!isJsonType(req)) fail(415, code, 'the body must be application/json');
  const raw = await readBody(req, res, limit, code);
  let value;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw));
  } catch {
    fail(400, code, 'the body is not JSON text');
  }
  if (!isObject(value)) fail(invalidStatus, code, 'the body must be a JSON object');
  return value;
}

function onlyKeys(value, allowed, code, where) {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) fail(422, code, `${where}: unknown key ${JSON.stringify(key)}`);
  }
}

function cursorOf(query, code) {
  const params = new URLSearchParams(query);
  const values = params.getAll('after');
  if (values.length === 0) return 0;
  const [raw] = values;
  if (values.length > 1 || !CURSOR.test(raw) || Number(raw) > Number.MAX_SAFE_INTEGER) {
    fail(400, code, 'after must be one non-negative safe integer');
  }
  return Number(raw);
}

// -- the guard ------------------------------------------------------------------------------------

function loopbackPeer(req) {
  const peer = req.socket.remoteAddress || '';
  return peer === '127.0.0.1' || peer === '::1' || peer === '::ffff:127.0.0.1';
}

function sameSecret(given, wanted) {
  const a = Buffer.from(String(given));
  const b = Buffer.from(wanted);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

function browserAuthorities() {
  return [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
}

function cookieValue(req, name) {
  for (const part of (req.headers.cookie || '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return null;
}

function guardBrowser(req, route) {
  if (!loopbackPeer(req)) fail(403, 'refdev.peer', 'only loopback peers are served');
  const host = (req.headers.host || '').toLowerCase();
  if (!browserAuthorities().includes(host)) {
    fail(421, 'refdev.host', 'the Host is not this server');
  }
  const origin = req.headers.origin;
  if (origin !== undefined) {
    const allowed = browserAuthorities().map((authority) => `http://${authority}`);
    if (!allowed.includes(origin.toLowerCase())) {
      fail(403, 'refdev.origin', 'the Origin is not this server');
    }
  }
  if (BREAK.has('open-sessions') && route.startsWith('/api/sessions')) return;
  const header = req.headers['x-bundle-session'];
  const cookie = cookieValue(req, COOKIE);
  const presented = header !== undefined ? header : cookie;
  if (presented === null || presented === undefined) {
    fail(401, 'refdev.session.missing', 'the session value is required');
  }
  if (!sameSecret(presented, SESSION_VALUE)) {
    fail(401, 'refdev.session.wrong', 'the session value is not this server\'s');
  }
}

function guardReceipt(req) {
  if (req.headers.origin !== undefined && !BREAK.has('receipt-origin')) {
    fail(403, 'refdev.receipt.origin', 'the receipt route refuses browser requests');
  }
  if (!loopbackPeer(req)) fail(403, 'refdev.peer', 'only loopback peers are served');
  const host = (req.headers.host || '').toLowerCase();
  if (host !== `127.0.0.1:${port}` && host !== `[::1]:${port}`) {
    fail(421, 'refdev.host', 'receipts go to http://127.0.0.1:PORT or http://[::1]:PORT');
  }
  const token = req.headers[RECEIPT_HEADER];
  if (token === undefined || !sameSecret(token, RECEIPT_TOKEN)) {
    fail(401, 'refdev.receipt.token', 'the receipt token is missing or wrong');
  }
}

function allow(req, methods, code = 'refdev.method') {
  if (!methods.includes(req.method)) {
    fail(405, code, `${req.method} is not supported here`, { Allow: methods.join(', ') });
  }
}

// -- trace and logs -------------------------------------------------------------------------------

function ensureOpen() {
  if (closing) fail(503, 'refdev.closed', 'the server is closing');
}

function traceReplay(req, res, query) {
  allow(req, ['GET']);
  ensureOpen();
  const after = cursorOf(query, 'refdev.cursor');
  if (after > trace.latest) fail(409, 'refdev.cursor.ahead', 'after is past the newest entry');
  const { items, dropped, first } = trace.since(after);
  const body = { entries: items, latestSequence: trace.latest };
  if (dropped) body.gap = traceGap(dropped, first, after);
  sendJson(res, 200, body);
}

function traceGap(dropped, first, after) {
  return {
    type: 'trace.gap',
    droppedCount: dropped,
    firstAvailableSequence: first,
    requestedAfterSequence: after,
  };
}

function logReplay(req, res, query) {
  allow(req, ['GET']);
  ensureOpen();
  const after = cursorOf(query, 'refdev.cursor');
  if (after > logs.latest) fail(409, 'refdev.cursor.ahead', 'after is past the newest record');
  const { items, dropped, first } = logs.since(after);
  const replay = { records: items, cursor: logs.latest };
  if (dropped) replay.skipped = { count: dropped, firstKept: first, requestedAfter: after };
  sendJson(res, 200, { replay });
}

const streams = new Set();

function ndjson(req, res, query, history, frame, gapFrame, idleFrame) {
  allow(req, ['GET']);
  ensureOpen();
  const after = cursorOf(query, 'refdev.cursor');
  if (after > history.latest) fail(409, 'refdev.cursor.ahead', 'after is past the newest item');
  res.writeHead(200, baseHeaders({ 'Content-Type': 'application/x-ndjson' }));
  res.flushHeaders();
  const write = (value) => {
    res.write(`${JSON.stringify(value)}\n`);
    if (res.writableLength > STREAM_BACKLOG) res.destroy();
  };
  const { items, dropped, first } = history.since(after);
  if (dropped) write(gapFrame(dropped, first, after));
  for (const item of items) write(frame(item));
  let timer;
  const idle = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      write(idleFrame());
      idle();
    }, NDJSON_IDLE_MS);
  };
  const listener = (item) => {
    write(frame(item));
    idle();
  };
  history.listeners.add(listener);
  idle();
  const stop = () => {
    clearTimeout(timer);
    history.listeners.delete(listener);
    streams.delete(stop);
    if (!res.writableEnded) res.end();
  };
  streams.add(stop);
  res.on('close', stop);
}

function traceStream(req, res, query) {
  ndjson(
    req, res, query, trace,
    (entry) => ({ type: 'entry', entry }),
    traceGap,
    () => ({ type: 'idle', at: new Date().toISOString() }),
  );
}

function logStream(req, res, query) {
  ndjson(
    req, res, query, logs,
    (record) => ({ record }),
    (count, firstKept, requestedAfter) => ({ skipped: { count, firstKept, requestedAfter } }),
    () => ({ idle: new Date().toISOString() }),
  );
}

// -- receipts -------------------------------------------------------------------------------------

function invalid(detail) {
  fail(422, 'refdev.receipt.invalid', detail);
}

function receiptKeys(value, allowed, where) {
  onlyKeys(value, allowed, 'refdev.receipt.invalid', where);
}

const isString = (value) => typeof value === 'string' && value.length > 0 && value.length <= 256;
const isCount = (value) => Number.isInteger(value) && value >= 0;
const isMillis = (value) => typeof value === 'number' && Number.isFinite(value) && value >= 0;

function checkKernelEvent(event, index) {
  const where = `kernel[${index}]`;
  if (!isObject(event)) invalid(`${where} is not an object`);
  const shape = KERNEL_KINDS[event.kind];
  if (!shape) invalid(`${where}.kind is not a kernel event kind`);
  const [phase, extra] = shape;
  receiptKeys(event, ['kind', 'phase', 'sequence', 'at', 'wallStart', ...extra], where);
  if (!PHASES.has(event.phase) || (phase !== null && event.phase !== phase)) {
    invalid(`${where}.phase does not fit ${event.kind}`);
  }
  if (!isCount(event.sequence)) invalid(`${where}.sequence is not a count`);
  if (!isMillis(event.at)) invalid(`${where}.at is not monotonic milliseconds`);
  if (typeof event.wallStart !== 'string' || Number.isNaN(Date.parse(event.wallStart))) {
    invalid(`${where}.wallStart is not a timestamp`);
  }
  if ('durationMs' in event && !isMillis(event.durationMs)) invalid(`${where}.durationMs`);
  if (event.kind === 'handler.outcome' && !['render', 'continue', 'deny'].includes(event.outcome)) {
    invalid(`${where}.outcome`);
  }
  if (event.kind === 'execute.start' && !['shared', 'standalone'].includes(event.runtime)) {
    invalid(`${where}.runtime`);
  }
  if (event.kind === 'providers.finish' && !isCount(event.count)) invalid(`${where}.count`);
  if (event.kind === 'failure') {
    const { error } = event;
    if (!isObject(error)) invalid(`${where}.error`);
    receiptKeys(error, ['name', 'message', 'code'], `${where}.error`);
    if (!isString(error.name) || typeof error.message !== 'string' || error.message.length > 512) {
      invalid(`${where}.error`);
    }
    if ('code' in error && !isString(error.code)) invalid(`${where}.error.code`);
  }
}

function checkReceipt(body) {
  receiptKeys(body, ['v', 'execution', 'kernel', 'identity', 'lineage'], 'receipt');
  if (body.v !== 1) invalid('v must be 1');
  const { execution, kernel, identity } = body;
  if (!isObject(execution)) invalid('execution is not an object');
  receiptKeys(execution, ['event', 'executionId', 'host', 'nativeEvent'], 'execution');
  if (!FAMILIES.has(execution.event)) invalid('execution.event is not an event family');
  for (const key of ['executionId', 'host', 'nativeEvent']) {
    if (!isString(execution[key])) invalid(`execution.${key} is not a string`);
  }
  if (!Array.isArray(kernel) || kernel.length > 64) invalid('kernel is not a list of events');
  kernel.forEach(checkKernelEvent);
  if (kernel.some((event, index) => event.kind === 'failure' && index !== kernel.length - 1)) {
    invalid('a failure is the last kernel event');
  }
  if (!isObject(identity)) invalid('identity is not an object');
  receiptKeys(identity, IDENTITY_KEYS, 'identity');
  for (const key of ['host', 'sessionId']) {
    if (!isString(identity[key])) invalid(`identity.${key} is not a string`);
  }
  for (const key of ['requestId', 'correlationId', 'devSession']) {
    if (key in identity && typeof identity[key] !== 'string') invalid(`identity.${key}`);
  }
  if (!isString(body.lineage)) invalid('lineage is not a string');
}

async function receipt(req, res) {
  guardReceipt(req);
  allow(req, ['POST']);
  ensureOpen();
  const body = await readJsonObject(req, res, RECEIPT_LIMIT, 'refdev.receipt.too-large', 422);
  checkReceipt(body);
  const { execution, kernel, identity } = body;
  let session = null;
  if ('devSession' in identity) {
    session = SESSION_ID.test(identity.devSession) ? sessions.get(identity.devSession) : undefined;
    if (!session) {
      log('warn', 'receipts', 'a receipt named an unknown development session', { code: 'AB8266' });
      fail(422, 'AB8266', 'BUNDLE_DEV_SESSION does not name a session of this server');
    }
  }
  const last = kernel[kernel.length - 1];
  const outcome = kernel.find((event) => event.kind === 'handler.outcome');
  const correlation = {
    host: identity.host,
    sessionId: identity.sessionId,
    executionId: execution.executionId,
  };
  if (identity.requestId !== undefined) correlation.requestId = identity.requestId;
  if (identity.correlationId !== undefined) correlation.correlationId = identity.correlationId;
  const entry = {
    source: 'hook',
    kind: `receipt.${execution.event}`,
    summary: `${execution.nativeEvent} on ${identity.host}: ${kernel.length} kernel event(s)` +
      (outcome ? `, ${outcome.outcome}` : ''),
    correlation,
    status: last && last.kind === 'failure' ? 'error' : 'ok',
    details: {
      event: execution.event,
      nativeEvent: execution.nativeEvent,
      lineage: body.lineage,
      kinds: kernel.map((event) => event.kind),
    },
  };
  if (kernel.length > 1) entry.durationMs = Math.max(0, last.at - kernel[0].at);
  traceEntry(entry);
  if (session) session.view.traceSessionId = identity.sessionId;
  log('info', 'receipts', `receipt for ${execution.event} accepted`, {
    host: identity.host,
    requestId: identity.requestId,
    executionId: execution.executionId,
    correlationId: identity.correlationId,
  });
  sendEmpty(res, 204);
}

// -- host sessions --------------------------------------------------------------------------------

const HOST_SCRIPT = [
  'printf "refdev host_a ready (%sx%s)\\n" "$COLUMNS" "$LINES"',
  'while IFS= read -r line; do',
  '  case "$line" in exit|exit\\ *) set -- $line; exit "${2:-0}";; esac',
  '  printf "you said: %s\\n" "$line"',
  'done',
].join('\n');

const HOSTS = {
  host_a: { executable: '/bin/sh' },
  host_b: { executable: null, reason: 'no host_b executable is installed for this server' },
};

const sessions = new Map();

function availability() {
  return Object.entries(HOSTS).map(([host, spec]) => {
    const launchable = spec.executable !== null && fs.existsSync(spec.executable);
    const row = { host, launchable };
    if (launchable) row.executable = spec.executable;
    else row.reason = spec.reason || `${spec.executable} is missing`;
    return row;
  });
}

function activeCount() {
  return [...sessions.values()].filter((s) => s.view.state === 'active').length;
}

function newSessionId() {
  const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';
  let id;
  do {
    id = 'hs_';
    for (const byte of crypto.randomBytes(16)) id += alphabet[byte % 36];
  } while (sessions.has(id));
  return id;
}

function broadcast(session, event, data) {
  for (const listener of session.listeners) listener(event, data);
}

async function launch(host, cols, rows, prompt, restartOf) {
  const spec = HOSTS[host];
  if (!availability().find((row) => row.host === host).launchable) {
    fail(424, 'AB8263', `${host} cannot be launched: ${spec.reason}`);
  }
  if (activeCount() >= ACTIVE_CAP && !BREAK.has('no-cap')) {
    fail(429, 'AB8264', 'four sessions are already active');
  }
  const id = newSessionId();
  const env = {
    PATH: process.env.PATH || '/usr/bin:/bin',
    HOME: process.env.HOME || PROJECT,
    LANG: 'C.UTF-8',
    COLUMNS: String(cols),
    LINES: String(rows),
    BUNDLE_DEV_SESSION: id,
    REFDEV_RECEIPT_URL: `http://127.0.0.1:${port}/api/trace/receipts`,
    REFDEV_RECEIPT_TOKEN: RECEIPT_TOKEN,
  };
  const child = spawn(spec.executable, ['-c', HOST_SCRIPT], {
    cwd: PROJECT, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'],
  });
  try {
    await new Promise((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
  } catch (error) {
    log('error', 'sessions', `${host} could not be spawned`, { host, code: 'AB8263' });
    fail(502, 'AB8263', `${host} could not be spawned: ${error.code || 'error'}`);
  }
  const view = {
    id, host, state: 'active', startedAt: Date.now(), pid: child.pid, cols, rows,
    authority: {
      projectRoot: PROJECT,
      epochId: EPOCH_ID,
      destination: path.join(PROJECT, '.refdev', 'plugins', host),
    },
  };
  if (prompt !== undefined) view.prompt = prompt;
  if (restartOf !== undefined) view.restartOf = restartOf;
  const session = { view, child, output: [], outputBytes: 0, listeners: new Set(), ended: null };
  session.ended = new Promise((resolve) => {
    child.once('close', (code, signal) => {
      view.state = 'ended';
      view.endedAt = Date.now();
      view.exitCode = code ?? 128 + (os.constants.signals[signal] || 0);
      if (signal) view.signal = signal;
      traceEntry({
        source: 'session',
        kind: 'session.ended',
        summary: `${host} session ended (${view.exitCode})`,
        correlation: { host, sessionId: id }, status: view.exitCode === 0 ? 'ok' : 'error',
        durationMs: view.endedAt - view.startedAt,
      });
      log('info', 'sessions', `${host} session ended with ${view.exitCode}`, { host, session: id });
      broadcast(session, 'end', { session: view });
      resolve();
    });
  });
  const keep = (chunk) => {
    session.output.push(chunk);
    session.outputBytes += chunk.length;
    while (session.outputBytes - session.output[0].length >= OUTPUT_KEPT) {
      session.outputBytes -= session.output.shift().length;
    }
    broadcast(session, 'output', { data: chunk.toString('base64') });
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  child.stdin.on('error', () => {}); // a write racing the process's end
  sessions.set(id, session);
  if (prompt) child.stdin.write(`${prompt}\n`); // an empty prompt types nothing
  traceEntry({
    source: 'session', kind: 'session.started', summary: `${host} session started`,
    correlation: { host, sessionId: id }, status: 'running',
  });
  log('info', 'sessions', `${host} session started`, { host, session: id });
  return view;
}

function retained(session) {
  const all = Buffer.concat(session.output);
  return all.length > OUTPUT_KEPT ? all.subarray(all.length - OUTPUT_KEPT) : all;
}

async function end(session) {
  if (session.view.state !== 'active') return;
  const group = -session.child.pid;
  try {
    process.kill(group, 'SIGTERM');
  } catch {
    // already gone
  }
  const timer = setTimeout(() => {
    try {
      process.kill(group, 'SIGKILL');
    } catch {
      // already gone
    }
  }, 3000);
  await session.ended;
  clearTimeout(timer);
}

function dimensions(body) {
  for (const key of ['cols', 'rows']) {
    const value = body[key];
    if (!Number.isInteger(value) || value < 1 || value > 500) {
      fail(422, 'AB8261', `${key} must be an integer from 1 to 500`);
    }
  }
  return [body.cols, body.rows];
}

async function sessionBody(req, res) {
  return readJsonObject(req, res, SESSION_BODY_LIMIT, 'AB8261', 422);
}

function sessionOf(id) {
  const session = sessions.get(id);
  if (!session) fail(404, 'AB8262', `no session ${id}`);
  return session;
}

async function sessionRoutes(req, res, route, query) {
  if (closing) fail(503, 'AB8265', 'the host-session service is closed');
  if (query !== '') fail(400, 'AB8261', 'session routes take no query');
  const parts = route.split('/').slice(3); // after '', 'api', 'sessions'
  if (parts.length === 0) {
    allow(req, ['GET', 'POST'], 'AB8261');
    if (req.method === 'GET') {
      const views = [...sessions.values()].map((s) => s.view);
      sendJson(res, 200, { sessions: views, hosts: availability() });
      return;
    }
    const body = await sessionBody(req, res);
    onlyKeys(body, ['host', 'prompt', 'cols', 'rows'], 'AB8261', 'create body');
    if (!(body.host in HOSTS)) fail(422, 'AB8261', 'host must be host_a or host_b');
    if ('prompt' in body) {
      if (typeof body.prompt !== 'string' || Buffer.byteLength(body.prompt) > INPUT_LIMIT) {
        fail(422, 'AB8261', 'prompt must be a string of at most 16 KiB');
      }
    }
    const [cols, rows] = dimensions(body);
    sendJson(res, 201, { session: await launch(body.host, cols, rows, body.prompt) });
    return;
  }
  const [id, action, ...rest] = parts;
  if (!SESSION_ID.test(id) || rest.length > 0) fail(400, 'AB8261', 'malformed session path');
  const actions = {
    '': ['GET', 'DELETE'],
    stream: ['GET'],
    input: ['POST'],
    resize: ['POST'],
    terminate: ['POST'],
    restart: ['POST'],
  };
  const methods = Object.hasOwn(actions, action ?? '') ? actions[action ?? ''] : null;
  if (methods === null || action === '') fail(400, 'AB8261', 'malformed session path');
  allow(req, methods, 'AB8261');
  const session = sessionOf(id);
  const { view } = session;
  if (action === undefined && req.method === 'GET') {
    sendJson(res, 200, { session: view });
  } else if (action === undefined) {
    if (view.state === 'active') {
      fail(409, 'AB8261', 'a running session cannot be forgotten: terminate it first');
    }
    await end(session);
    sessions.delete(id);
    sendEmpty(res, 204);
  } else if (action === 'stream') {
    sessionStream(res, session);
  } else if (action === 'input') {
    const body = await sessionBody(req, res);
    onlyKeys(body, ['data'], 'AB8261', 'input body');
    if (typeof body.data !== 'string') fail(422, 'AB8261', 'data must be a string');
    if (Buffer.byteLength(body.data) > INPUT_LIMIT) fail(422, 'AB8261', 'data is over 16 KiB');
    if (view.state !== 'active') fail(409, 'AB8261', 'the session has ended');
    session.child.stdin.write(body.data);
    sendEmpty(res, 204);
  } else if (action === 'resize') {
    const body = await sessionBody(req, res);
    onlyKeys(body, ['cols', 'rows'], 'AB8261', 'resize body');
    const [cols, rows] = dimensions(body);
    if (view.state !== 'active') fail(409, 'AB8261', 'the session has ended');
    view.cols = cols;
    view.rows = rows;
    broadcast(session, 'state', { session: view });
    sendEmpty(res, 204);
  } else if (action === 'terminate') {
    const body = await sessionBody(req, res);
    onlyKeys(body, [], 'AB8261', 'terminate body');
    await end(session);
    sendJson(res, 200, { session: view });
  } else {
    const body = await sessionBody(req, res);
    onlyKeys(body, ['cols', 'rows'], 'AB8261', 'restart body');
    const [cols, rows] = dimensions(body);
    await end(session);
    sendJson(res, 201, { session: await launch(view.host, cols, rows, view.prompt, id) });
  }
}

function sessionStream(res, session) {
  res.writeHead(200, baseHeaders({ 'Content-Type': 'text/event-stream' }));
  res.flushHeaders();
  const send = (event, data) => {
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    if (res.writableLength > STREAM_BACKLOG) res.destroy();
  };
  send('state', { session: session.view });
  send('output', { data: retained(session).toString('base64') });
  if (session.view.state !== 'active') {
    send('end', { session: session.view });
    res.end();
    return;
  }
  const keepalive = setInterval(() => res.write(': keep-alive\n\n'), SSE_KEEPALIVE_MS);
  const listener = (event, data) => {
    send(event, data);
    if (event === 'end') stop();
  };
  session.listeners.add(listener);
  const stop = () => {
    clearInterval(keepalive);
    session.listeners.delete(listener);
    streams.delete(stop);
    if (!res.writableEnded) res.end();
  };
  streams.add(stop);
  res.on('close', stop);
}

// -- dispatch -------------------------------------------------------------------------------------

async function handle(req, res) {
  const [route, query] = splitTarget(req.url || '/');
  if (route === '/api/trace/receipts') {
    await receipt(req, res);
    return;
  }
  guardBrowser(req, route);
  if (route === '/api/trace') traceReplay(req, res, query);
  else if (route === '/api/trace/stream') traceStream(req, res, query);
  else if (route === '/api/logs/replay') logReplay(req, res, query);
  else if (route === '/api/logs/stream') logStream(req, res, query);
  else if (route === '/api/sessions' || route.startsWith('/api/sessions/')) {
    await sessionRoutes(req, res, route, query);
  } else fail(404, 'refdev.not-found', `nothing is served at ${route}`);
}

const server = http.createServer({ headersTimeout: 10000, requestTimeout: 30000 }, (req, res) => {
  handle(req, res).catch((error) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (error instanceof Problem) {
      sendProblem(res, error);
    } else {
      log('error', 'server', 'a request failed unexpectedly');
      sendProblem(res, new Problem(500, 'refdev.internal', 'the server failed'));
    }
  });
});

const endpointFile = path.join(PROJECT, '.bundle', 'hook-receipts.json');

function writeAtomically(file, text, mode) {
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, text, { mode });
  fs.renameSync(temporary, file);
}

server.listen(Number(options.port), '127.0.0.1', () => {
  port = server.address().port;
  const url = `http://127.0.0.1:${port}`;
  fs.mkdirSync(path.dirname(endpointFile), { recursive: true, mode: 0o700 });
  writeAtomically(
    endpointFile,
    JSON.stringify({
      endpoint: `${url}/api/trace/receipts`,
      token: RECEIPT_TOKEN,
      header: RECEIPT_HEADER,
    }),
    0o600,
  );
  log('info', 'server', 'refdev started');
  if (options.ready) {
    const ready = {
      url, port, session: SESSION_VALUE, receiptToken: RECEIPT_TOKEN,
      receiptHeader: RECEIPT_HEADER, endpointFile, pid: process.pid,
    };
    writeAtomically(options.ready, JSON.stringify(ready), 0o600);
  }
  process.stdout.write(`refdev listening on ${url}\n`);
});

async function shutdown() {
  if (closing) return;
  closing = true;
  fs.rmSync(endpointFile, { force: true });
  for (const stop of [...streams]) stop();
  await Promise.all([...sessions.values()].map(end));
  server.close();
  server.closeAllConnections();
  process.exit(0);
}

process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
