// The guarded API over this page's own origin, with the HttpOnly session cookie.

export class ApiError extends Error {
  constructor(status, error) {
    super(error && error.message ? error.message : `HTTP ${status}`);
    this.status = status;
    this.code = error ? error.code : undefined;
  }
}

async function decode(response) {
  if (response.status === 204) return null;
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    if (response.status === 401) connection.set("signed-out");
    throw new ApiError(response.status, body && body.error);
  }
  return body;
}

export async function getJSON(path) {
  return decode(await fetch(path, { headers: { Accept: "application/json" } }));
}

export async function send(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return decode(await fetch(path, init));
}

export const postJSON = (path, body) => send("POST", path, body);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The page's view of its connection to the server: `live`, `reconnecting`, `signed-out`.
 * Every stream reports to it; the header shows it. */
export const connection = {
  state: "connecting",
  listeners: new Set(),
  set(state) {
    if (this.state === state) return;
    this.state = state;
    for (const listener of this.listeners) listener(state);
  },
};

/** Follow an NDJSON stream from sequence `after`, resuming where it left off after a drop (with
 * backoff: 250 ms doubling to 5 s), until `close()`. `onFrame(frame)` gets every frame but the
 * keep-alives; `sequenceOf(frame)` says which frames move the cursor. */
export function follow(path, { after = 0, onFrame, sequenceOf }) {
  let closed = false;
  let controller = null;
  let delay = 250;
  async function run() {
    while (!closed) {
      controller = new AbortController();
      try {
        const response = await fetch(`${path}?after=${after}`, { signal: controller.signal });
        if (response.status === 401) {
          connection.set("signed-out");
          return;
        }
        if (!response.ok) throw new ApiError(response.status, null);
        connection.set("live");
        delay = 250;
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n")) >= 0) {
            const line = buffer.slice(0, end);
            buffer = buffer.slice(end + 1);
            if (!line) continue;
            const frame = JSON.parse(line);
            if (frame.type && frame.type.endsWith(".keepalive")) continue;
            const sequence = sequenceOf(frame);
            if (sequence !== undefined) after = sequence;
            onFrame(frame);
          }
        }
      } catch (error) {
        if (closed) return;
      }
      if (closed) return;
      connection.set("reconnecting");
      await sleep(delay);
      delay = Math.min(delay * 2, 5000);
    }
  }
  run();
  return {
    close() {
      closed = true;
      if (controller) controller.abort();
    },
  };
}

/** Read server-sent events from `response` until it ends: `onEvent(name, data)` for each. */
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue; // a comment (keep-alive)
      onEvent(name, JSON.parse(data));
    }
  }
}

/** The unified trace from its start, then live: `receive(frame)` gets the replay's gap (if
 * any) and entries as `trace.entry` frames, `replayed()` runs once they are in, then the
 * stream's frames follow from where the replay ended (after a gap, from the first entry the
 * server still has). `failed(error)` says the replay could not be read. Returns {close()}. */
export function followTrace({ receive, replayed, failed }) {
  let closed = false;
  let stream = null;
  (async () => {
    let after = 0;
    try {
      const replay = await getJSON("/api/trace?after=0");
      if (closed) return;
      if (replay.gap) receive(replay.gap);
      for (const entry of replay.entries) receive({ type: "trace.entry", entry });
      after = replay.latestSequence;
    } catch (caught) {
      if (closed) return;
      failed(caught);
    }
    replayed();
    if (closed) return;
    stream = follow("/api/trace/stream", {
      after,
      sequenceOf: (f) =>
        f.type === "trace.entry" ? f.entry.sequence : f.type === "trace.gap" ? f.firstAvailableSequence - 1 : undefined,
      onFrame: receive,
    });
  })();
  return {
    close() {
      closed = true;
      if (stream) stream.close();
    },
  };
}
