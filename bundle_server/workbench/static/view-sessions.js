// Sessions: the hosts that can be launched, and one terminal (xterm.js) per host session,
// attached to its session stream (a subscription of the page's one multiplexed stream, see
// api.js): the replay first, then live output, byte-exact.
// The host kinds the project targets come first; the others wait behind "More host kinds". A
// host kind that cannot be launched for want of its executable says what to do (the server's
// HostAvailability `setup`): install the real CLI, or name another executable in dev.hosts.
import { ApiError, followSession, getJSON, postJSON, send } from "/assets/api.js";
import { emptyState, h, loadingState, replace } from "/assets/dom.js";
import { FitAddon } from "/assets/addon-fit.mjs";
import { Terminal } from "/assets/xterm.mjs";

export const title = "Sessions";

// Flow control as ttyd does it, per session: the bytes xterm.js has taken in are reported
// (`consumed`), and the server sends at most its window beyond them (then its queue fills and
// stops reading the PTY: the host blocks, as on a slow terminal). So `yes` in a session never
// buries the page under output it cannot paint, and never holds back another session's
// output, which shares the connection.
const RESIZE_DELAY_MS = 100;
// Alt+Shift+Up: a combination a terminal program hardly ever needs (xterm sends ESC [1;4A).
const LEAVE_KEYS_LABEL = "Alt+Shift+↑";

export function mount(container) {
  const hosts = h("div", { className: "hosts", "aria-label": "Hosts" }, loadingState("Looking for the host CLIs…"));
  const list = h("div", { className: "sessions" });
  const error = h("p", { className: "error-state", role: "alert" });
  const noSessions = emptyState("No host sessions yet: start one above, and its terminal opens here.");
  noSessions.hidden = true; // until the list is read
  const cards = new Map();
  replace(
    container,
    h("h2", {}, "Host sessions"),
    hosts,
    error,
    noSessions,
    list,
  );
  // The empty state follows the cards (draft cards of a session being started count too).
  new MutationObserver(() => {
    noSessions.hidden = list.childElementCount > 0;
  }).observe(list, { childList: true });

  function addCard(session) {
    if (cards.has(session.id)) return cards.get(session.id);
    const card = new SessionCard(session, {
      onGone: () => cards.delete(session.id),
      onRestarted: (next) => addCard(next).attach(),
      onError: (message) => (error.textContent = message),
    });
    cards.set(session.id, card);
    list.prepend(card.element);
    return card;
  }

  async function create(host, prompt) {
    error.textContent = "";
    // The terminal is laid out first, so the session starts at the size it will be shown at.
    const draft = new SessionCard({ id: "", host, state: "starting" }, {});
    list.prepend(draft.element);
    const { cols, rows } = draft.size();
    draft.dispose();
    try {
      const body = { host, cols, rows };
      if (prompt) body.prompt = prompt;
      const { session } = await postJSON("/api/sessions", body);
      addCard(session).attach();
    } catch (caught) {
      error.textContent = `Could not start ${host}: ${caught.message}`;
    }
  }

  function showHosts(available) {
    const more = hosts.querySelector("details.more-hosts");
    const wasOpen = Boolean(more && more.open);
    const panel = (host) => hostPanel(host, create, recheck);
    const others = available.filter((host) => !host.targeted);
    replace(
      hosts,
      available.filter((host) => host.targeted).map(panel),
      others.length
        ? h(
            "details",
            { className: "more-hosts", open: wasOpen },
            h("summary", {}, `More host kinds (${others.length}), not targeted by this project`),
            h("div", { className: "hosts" }, others.map(panel)),
          )
        : null,
    );
  }

  // After installing a CLI or editing dev.hosts: the server looks again, nothing restarts.
  async function recheck() {
    try {
      showHosts((await getJSON("/api/sessions")).hosts);
    } catch (caught) {
      if (!(caught instanceof ApiError && caught.status === 401)) error.textContent = caught.message;
    }
  }

  async function load() {
    try {
      const { sessions, hosts: available } = await getJSON("/api/sessions");
      showHosts(available);
      // Newest on top, as a session started here is: each card is prepended, oldest first.
      const oldestFirst = sessions.slice().sort((a, b) => (a.startedAt < b.startedAt ? -1 : 1));
      for (const session of oldestFirst) addCard(session).attach();
      noSessions.hidden = list.childElementCount > 0;
    } catch (caught) {
      replace(hosts);
      if (!(caught instanceof ApiError && caught.status === 401)) error.textContent = caught.message;
    }
  }
  load();
  // A hidden tab lets go of its sessions' subscriptions (a tab nobody looks at must not pace a
  // host's output to its throttled timers), and attaches again (replay first) when shown.
  function visibility() {
    for (const card of cards.values()) {
      if (document.hidden) card.suspend();
      else card.wake();
    }
  }
  document.addEventListener("visibilitychange", visibility);
  return {
    unmount() {
      document.removeEventListener("visibilitychange", visibility);
      for (const card of cards.values()) card.dispose();
      cards.clear();
    },
  };
}

function hostPanel(host, create, recheck) {
  const setupId = `setup-${host.host}`;
  const prompt = h("input", {
    type: "text",
    placeholder: "prompt (optional)",
    "aria-label": `Prompt for ${host.host}`,
    disabled: !host.launchable,
  });
  const start = h(
    "button",
    {
      type: "button",
      className: "btn-primary",
      disabled: !host.launchable,
      "aria-describedby": host.setup ? setupId : undefined,
      onclick: () => create(host.host, prompt.value.trim()),
    },
    `Start ${host.host}`,
  );
  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && host.launchable) start.click();
  });
  // Not launchable is a fault only for a host kind the project targets.
  const detail = host.launchable
    ? h("span", { className: "muted" }, host.executable || "")
    : h("span", { className: host.targeted ? "warn" : "muted" }, host.reason || "not launchable");
  return h(
    "div",
    { className: "host", "data-host": host.host, "data-targeted": String(Boolean(host.targeted)) },
    h("div", {}, h("strong", {}, host.host), " ", detail, " ", prompt, " ", start),
    host.setup ? setupHelp(host, setupId, recheck) : null,
  );
}

// What makes a host kind launchable whose executable was not found: the real CLI, installed
// as the server says (hosts.toml's npm package at its tested version), or another executable
// named in the project config's dev.hosts.
function setupHelp(host, id, recheck) {
  const { lookedFor, fromConfig, install, config } = host.setup;
  const where = [h("code", {}, "dev.hosts"), " of ", config ? h("code", {}, config) : "the project's config"];
  const entry = `"dev": {"hosts": {"${host.host}": {"executable": "/path/to/${lookedFor.split("/").pop()}"}}}`;
  const steps = [];
  if (fromConfig) {
    steps.push(
      h(
        "li",
        {},
        ...where,
        " names ",
        h("code", {}, lookedFor),
        ` for ${host.host}: make it an absolute path or a name on the server's PATH, or remove it to use the host's own CLI.`,
      ),
    );
  }
  if (install) {
    steps.push(
      h(
        "li",
        { className: "install" },
        `Install ${install.npmPackage} (the version the bundle is tested with): `,
        h("code", {}, shellJoin(install.command)),
      ),
    );
  }
  if (!fromConfig) {
    steps.push(
      h(
        "li",
        { className: "configure" },
        `Or name another executable for ${host.host} in `,
        ...where,
        ": ",
        h("code", { className: "entry" }, entry),
      ),
    );
  }
  return h(
    "div",
    { className: "setup", id },
    h("p", {}, `To start ${host.host} sessions, the server looked for `, h("code", {}, lookedFor), " on its PATH:"),
    h("ul", {}, steps),
    h("button", { type: "button", onclick: recheck }, "Check again"),
  );
}

function shellJoin(argv) {
  return argv.map((word) => (/^[A-Za-z0-9@%+=:,./_-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`)).join(" ");
}

class SessionCard {
  constructor(session, { onGone, onRestarted, onError }) {
    this.session = session;
    this.onGone = onGone || (() => {});
    this.onRestarted = onRestarted || (() => {});
    this.onError = onError || (() => {});
    this.state = h("span", { className: "state", role: "status" });
    this.terminalBox = h("div", { className: "terminal" });
    this.buttons = {
      terminate: h("button", { type: "button", className: "btn-danger", onclick: () => this.terminate() }, "Terminate"),
      restart: h("button", { type: "button", onclick: () => this.restart() }, "Restart"),
      forget: h("button", { type: "button", onclick: () => this.forget() }, "Forget"),
    };
    const hintId = `keys-${session.id || "draft"}`;
    this.element = h(
      "section",
      { className: "session", "aria-label": `Session ${session.host} ${session.id}`, "data-session": session.id },
      h("header", {}, h("strong", {}, session.host), h("code", {}, session.id), this.state, ...Object.values(this.buttons)),
      this.terminalBox,
      h("p", { className: "muted keys", id: hintId }, `${LEAVE_KEYS_LABEL} leaves the terminal`),
    );
    this.terminal = new Terminal({ convertEol: false, cursorBlink: true, scrollback: 5000, fontSize: 13 });
    this.fit = new FitAddon();
    this.terminal.loadAddon(this.fit);
    // The terminal takes Tab (a shell completes with it), so keyboard users leave it with a
    // key of their own, announced with the terminal's input.
    this.terminal.attachCustomKeyEventHandler((event) => {
      if (event.type === "keydown" && event.altKey && event.shiftKey && event.key === "ArrowUp") {
        const target = Object.values(this.buttons).find((button) => !button.disabled);
        if (target) target.focus();
        return false;
      }
      return true;
    });
    this.terminal.open(this.terminalBox);
    const input = this.terminalBox.querySelector("textarea");
    if (input) input.setAttribute("aria-describedby", hintId);
    this.fit.fit();
    this.rendered = 0;
    this.input = "";
    this.sending = false;
    this.stream = null; // the session's subscription, while attached and shown
    this.resetting = false; // a reset waits in xterm's queue: output waits in `held`
    this.held = [];
    this.disposed = false;
    this.attached = false;
    this.suspended = false; // the tab is hidden: no subscription until it is shown
    this.ended = false; // the stream delivered `end`: the terminal holds everything
    this.render(session);
  }

  size() {
    this.fit.fit();
    return { cols: this.terminal.cols, rows: this.terminal.rows };
  }

  render(session) {
    this.session = session;
    this.element.dataset.state = session.state;
    let text = session.state;
    if (session.state !== "running") {
      if (session.exitCode !== undefined) text += ` · exit ${session.exitCode}`;
      if (session.signal) text += ` · ${session.signal}`;
    }
    this.state.textContent = text;
    const running = session.state === "running";
    this.buttons.terminate.disabled = !running;
    this.buttons.forget.disabled = running;
    this.buttons.restart.disabled = !session.id;
  }

  attach() {
    if (this.attached) return;
    this.attached = true;
    this.terminal.onData((data) => this.type(data));
    this.terminal.onResize(({ cols, rows }) => this.resized(cols, rows));
    this.observer = new ResizeObserver(() => {
      if (!this.disposed) this.fit.fit();
    });
    this.observer.observe(this.terminalBox);
    if (document.hidden) this.suspended = true;
    else this.subscribe();
  }

  suspend() {
    if (this.suspended || this.ended || !this.attached) return;
    this.suspended = true;
    this.unsubscribe();
  }

  wake() {
    if (!this.suspended || this.disposed) return;
    this.suspended = false;
    if (!this.ended) {
      this.reset();
      this.subscribe();
    }
  }

  subscribe() {
    this.stream = followSession(this.session.id, {
      onEvent: (name, data) => {
        if (name === "output") this.write(decode(data.data));
        else if (name === "state" || name === "end") {
          this.render(data.session);
          if (name === "end") this.ended = true;
        }
      },
      // A fresh replay follows (a dropped connection, or cut for falling behind).
      onRestart: () => this.reset(),
      onError: (caught) => this.onError(`session ${this.session.id}: ${caught.message}`),
    });
  }

  unsubscribe() {
    if (this.stream) this.stream.close();
    this.stream = null;
  }

  reset() {
    // The reset goes through xterm's write queue: bytes of the old subscription still waiting
    // there are parsed first, so none of them lands after the reset, on top of the replay;
    // what arrives meanwhile waits until the reset is done.
    this.resetting = true;
    this.terminal.write("", () => {
      this.terminal.reset();
      this.rendered = 0;
      this.resetting = false;
      const held = this.held;
      this.held = [];
      for (const bytes of held) this.write(bytes);
    });
  }

  write(bytes) {
    if (!bytes.length) return;
    if (this.resetting) {
      this.held.push(bytes);
      return;
    }
    const stream = this.stream;
    // xterm.js decodes UTF-8 across writes itself: a character split between two frames is
    // joined, never shown as two replacement characters.
    this.terminal.write(bytes, () => {
      // What xterm.js has taken in since the last (re)attach: tests and the throughput bench
      // read it from the page.
      this.rendered += bytes.length;
      this.element.dataset.renderedBytes = String(this.rendered);
      if (stream && stream === this.stream) stream.consumed(bytes.length);
    });
  }

  type(data) {
    // Keystrokes in order: one request at a time, with whatever was typed meanwhile.
    this.input += data;
    if (!this.sending) this.flush();
  }

  async flush() {
    this.sending = true;
    while (this.input && !this.disposed) {
      const data = this.input;
      this.input = "";
      try {
        await postJSON(`/api/sessions/${this.session.id}/input`, { data });
      } catch (caught) {
        // What failed is reported and dropped; what was typed meanwhile is still sent.
        this.onError(`input to ${this.session.id}: ${caught.message}`);
      }
    }
    this.sending = false;
  }

  resized(cols, rows) {
    clearTimeout(this.resizeTimer);
    this.resizeTimer = setTimeout(() => {
      if (this.ending || this.session.state !== "running") return;
      postJSON(`/api/sessions/${this.session.id}/resize`, { cols, rows }).catch((caught) => {
        // A 409: the session ended as the resize went (its end event is on the way); a size
        // for a terminal that no longer runs is nothing to report.
        if (caught.status !== 409) this.onError(`resize of ${this.session.id}: ${caught.message}`);
      });
    }, RESIZE_DELAY_MS);
  }

  // Set once this card asked the server to end its session: the state event that says so may
  // come after a layout change resizes the terminal, and a resize of an ended session is a 409.
  stopResizing() {
    this.ending = true;
    clearTimeout(this.resizeTimer);
  }

  async terminate() {
    try {
      this.stopResizing();
      await postJSON(`/api/sessions/${this.session.id}/terminate`, {});
    } catch (caught) {
      this.ending = false; // still running: its terminal follows the layout again
      this.onError(caught.message);
    }
  }

  async restart() {
    try {
      const { cols, rows } = this.size();
      this.stopResizing(); // a restart ends this card's session
      const { session } = await postJSON(`/api/sessions/${this.session.id}/restart`, { cols, rows });
      this.onRestarted(session);
    } catch (caught) {
      this.ending = false;
      this.onError(caught.message);
    }
  }

  async forget() {
    try {
      await send("DELETE", `/api/sessions/${this.session.id}`);
      this.dispose();
      this.element.remove();
      this.onGone();
    } catch (caught) {
      this.onError(caught.message);
    }
  }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    this.unsubscribe();
    if (this.observer) this.observer.disconnect();
    this.terminal.dispose();
    if (!this.session.id) this.element.remove();
  }
}

function decode(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index += 1) bytes[index] = binary.charCodeAt(index);
  return bytes;
}
