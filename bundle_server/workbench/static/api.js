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

// Every stream of the page (the sessions', the trace's, the logs', the project events') travels
// in ONE multiplexed stream (POST /api/multiplex/stream): a browser opens at most six HTTP/1.1
// connections to an origin, and a stream holds one for its whole life, so a page of streams of
// their own starved itself once a few sessions ran. Each subscription keeps its stream's frames
// and resume; subscriptions come and go by short requests naming the stream. After a drop the
// stream is opened again with every subscription in it, each resumed (a hub from its cursor, a
// session from a fresh replay).
const MULTIPLEXED = {
  "/api/trace/stream": "trace.stream",
  "/api/logs/stream": "logs.stream",
  "/api/project/events/stream": "project.stream",
};

class Multiplexer {
  constructor() {
    this.subscriptions = new Map(); // wire id -> subscription
    this.streamId = null; // of the open stream, once its first frame said it
    this.generation = 0; // one per opened stream: which stream a subscription is on
    this.next = 0;
    // The server's session window (multiplex-session-window): its first frame says it, and no
    // output comes before that.
    this.window = 0;
    this.running = false;
    this.controller = null;
    this.adding = []; // subscriptions to add to the open stream, sent together
    this.orphans = []; // carried by the stream's request, removed before it answered
    this.delay = 250;
  }

  /** Start `subscription` ({request(id), frame(f), closed(reason), error(e), restart()}). */
  add(subscription) {
    subscription.wire = `s${(this.next += 1)}`;
    subscription.on = null;
    subscription.posted = null; // its subscribe POST, once sent
    this.subscriptions.set(subscription.wire, subscription);
    if (!this.running) this.run();
    else if (this.streamId) this.queue(subscription);
    // else: the stream is opening; its first frame adds what its request did not carry.
  }

  remove(subscription) {
    if (this.subscriptions.get(subscription.wire) !== subscription) return;
    this.subscriptions.delete(subscription.wire);
    if (subscription.on !== this.generation) return;
    if (!this.streamId) {
      this.orphans.push(subscription.wire); // let go once the stream says its id
      return;
    }
    // Two fetches are not ordered: the DELETE goes once the subscribe POST settled. (The
    // server refuses a subscribe of an id it was told to remove anyway.)
    const streamId = this.streamId;
    Promise.resolve(subscription.posted).then(() => this.unsubscribe(subscription.wire, streamId));
  }

  unsubscribe(wire, streamId = this.streamId) {
    send("DELETE", `/api/multiplex/${streamId}/subscriptions/${wire}`).catch(() => {});
  }

  queue(subscription) {
    subscription.on = this.generation;
    subscription.posted = null;
    this.adding.push(subscription);
    if (this.adding.length > 1) return;
    queueMicrotask(() => {
      const batch = this.adding.filter((s) => this.subscriptions.get(s.wire) === s);
      this.adding = [];
      if (!batch.length || !this.streamId) return;
      // Refusals of one subscription arrive as its error frame; a stream that is gone is
      // reopened by the reader with every subscription in it.
      const posted = postJSON(`/api/multiplex/${this.streamId}/subscriptions`, {
        subscriptions: batch.map((s) => s.request(s.wire)),
      }).catch(() => {});
      for (const subscription of batch) subscription.posted = posted;
    });
  }

  consumed(subscription, total) {
    if (!this.streamId || subscription.on !== this.generation) return;
    const path = `/api/multiplex/${this.streamId}/subscriptions/${subscription.wire}/consumed`;
    postJSON(path, { bytes: total }).catch(() => {});
  }

  async run() {
    this.running = true;
    for (;;) {
      this.generation += 1;
      const generation = this.generation;
      const carried = [...this.subscriptions.values()];
      this.orphans = [];
      for (const subscription of carried) {
        subscription.on = generation;
        subscription.posted = null; // carried by the stream's own request
      }
      this.controller = new AbortController();
      try {
        const response = await fetch("/api/multiplex/stream", {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/x-ndjson" },
          body: JSON.stringify({ subscriptions: carried.map((s) => s.request(s.wire)) }),
          signal: this.controller.signal,
        });
        if (response.status === 401) {
          connection.set("signed-out");
          this.running = false;
          return;
        }
        if (!response.ok) throw new ApiError(response.status, null);
        await this.read(response, generation);
      } catch (error) {
        // A dropped connection, a server gone: opened again below.
      }
      this.streamId = null;
      connection.set("reconnecting");
      // What each subscription had on the dropped stream ends here; a session's terminal is
      // painted again by the replay of its next subscription.
      for (const subscription of this.subscriptions.values()) subscription.restart();
      await sleep(this.delay);
      this.delay = Math.min(this.delay * 2, 5000);
    }
  }

  read(response, generation) {
    return readRecords(response, "\n", (line) => {
      if (line) this.dispatch(JSON.parse(line), generation);
    });
  }

  dispatch(frame, generation) {
    if (frame.type === "multiplex.opened") {
      this.streamId = frame.streamId;
      this.window = frame.sessionWindow;
      this.delay = 250;
      connection.set("live");
      for (const wire of this.orphans.splice(0)) this.unsubscribe(wire);
      for (const subscription of this.subscriptions.values()) {
        if (subscription.on !== generation) this.queue(subscription);
      }
      return;
    }
    const subscription = this.subscriptions.get(frame.subscription);
    if (!subscription) return; // a keep-alive, or one removed meanwhile
    if (frame.type === "multiplex.closed") {
      this.subscriptions.delete(subscription.wire);
      subscription.closed(frame.reason);
    } else if (frame.type === "multiplex.error") {
      this.subscriptions.delete(subscription.wire);
      subscription.error(new ApiError(undefined, frame.error));
    } else {
      subscription.frame(frame);
    }
  }
}

const multiplexer = new Multiplexer();

/** Follow an NDJSON stream from sequence `after`, resuming where it left off after a drop,
 * until `close()`. `onFrame(frame)` gets every frame but the keep-alives; `sequenceOf(frame)`
 * says which frames move the cursor. The stream is a subscription of the page's multiplexed
 * stream (`path` names which). */
export function follow(path, { after = 0, onFrame, sequenceOf }) {
  const route = MULTIPLEXED[path];
  let retry = null;
  const subscription = {
    request: (id) => ({ id, route, query: { after } }),
    frame(f) {
      const frame = f.frame;
      if (frame.type && frame.type.endsWith(".keepalive")) return;
      const sequence = sequenceOf(frame);
      if (sequence !== undefined) after = sequence;
      onFrame(frame);
    },
    closed(reason) {
      if (reason === "unsubscribed") return;
      // Cut for falling behind: again at once, from the cursor (the gap says what went);
      // its hub closed (the server stopping): again in a moment.
      retry = setTimeout(() => multiplexer.add(subscription), reason === "lagged" ? 0 : 1000);
    },
    error(error) {
      // A cursor ahead of the server's history is another server's: start from its beginning.
      if (error.code === "BX3002") after = 0;
      retry = setTimeout(() => multiplexer.add(subscription), 1000);
    },
    restart() {},
  };
  multiplexer.add(subscription);
  return {
    close() {
      clearTimeout(retry);
      multiplexer.remove(subscription);
    },
  };
}

/** Follow host session `id`'s stream: `onEvent(name, data)` for each `state`, `output` and
 * `end` event, as the session stream sends them. `onRestart()` comes before a fresh replay
 * (after a dropped connection, or a reader cut for falling behind): the terminal starts again.
 * `onError(error)` says the subscription was refused (an unknown session: 404). The output is
 * paced as a terminal paces a program: call `consumed(bytes)` as the terminal takes output in,
 * and the server sends at most its window beyond that. Returns {close(), consumed(bytes)}. */
export function followSession(id, { onEvent, onRestart, onError }) {
  let taken = 0; // output bytes the terminal took in, on this subscription
  let reported = 0;
  let ended = false;
  const subscription = {
    request: (wire) => {
      taken = 0;
      reported = 0;
      return { id: wire, route: "sessions.stream", params: { sessionId: id } };
    },
    frame(f) {
      if (f.event === "end") ended = true;
      onEvent(f.event, f.data);
    },
    closed(reason) {
      if (reason === "lagged") {
        onRestart();
        multiplexer.add(subscription);
      }
    },
    error(error) {
      onError(error);
    },
    restart() {
      if (!ended) onRestart();
    },
  };
  multiplexer.add(subscription);
  return {
    close() {
      multiplexer.remove(subscription);
    },
    consumed(bytes) {
      taken += bytes;
      // A quarter of the window at a time: few requests, and the server never waits on one
      // while the terminal keeps up.
      if (taken - reported >= multiplexer.window / 4) {
        reported = taken;
        multiplexer.consumed(subscription, taken);
      }
    },
  };
}

/** Read `response` as text records each ended by `separator`, `onRecord(text)` for each,
 * until it ends (a record split between two chunks is joined first). */
async function readRecords(response, separator, onRecord) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let start = 0;
    let end;
    while ((end = buffer.indexOf(separator, start)) >= 0) {
      const record = buffer.slice(start, end);
      start = end + separator.length;
      onRecord(record);
    }
    buffer = buffer.slice(start);
  }
}

/** Read server-sent events from `response` until it ends: `onEvent(name, data)` for each. */
export function readEvents(response, onEvent) {
  return readRecords(response, "\n\n", (block) => {
    let name = "message";
    let data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) name = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (data) onEvent(name, JSON.parse(data)); // no data: a comment (keep-alive)
  });
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
