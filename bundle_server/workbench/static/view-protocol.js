// Protocol: every JSON-RPC message of one MCP session (`/advanced/protocol?session=<launchId>`),
// as the unified trace recorded it (source `mcp`, correlation.mcpSessionId = the launch id):
// the retained history replayed once (GET /api/trace), then live from the trace stream. Newest
// last; a text filter over method and summary; each row opens to its correlation, details and
// the whole message (mcp-message.js: params, result, error). A request's row settles when its
// response arrives (trace-join.js: the view joins the pair by mcpRequestId). A tools/call or
// prompts/get request can be replayed as it was, or opened in the MCP view's form with its
// arguments to edit first (mcp-replay.js).
// Without `?session=` the page lists the active epoch's launches to choose from.
import { followTrace, getJSON } from "/assets/api.js";
import { h, replace, time } from "/assets/dom.js";
import { isErrorEntry, messageView } from "/assets/mcp-message.js";
import { editHref, replay, replayable } from "/assets/mcp-replay.js";
import { correlationHref } from "/assets/trace-filter.js";
import { Settlements, keyOf } from "/assets/trace-join.js";

export const title = "MCP protocol";

// The newest rows shown at once; the page keeps as many entries as the trace retains.
const SHOW = 2000;
const KEEP = 10000;
const COLUMNS = ["", "#", "time", "direction", "kind", "method", "JSON-RPC id", "status", "ms", "summary"];
const DIRECTIONS = { out: "→ out", in: "← in" };

function methodOf(entry) {
  const details = entry.details || {};
  return typeof details.method === "string" ? details.method : "";
}

function statusOf(entry, settlements) {
  const status = settlements.status(entry);
  if (status) return status;
  return entry.kind === "mcp.notification" ? "notification" : "";
}

async function chooser(container) {
  const note = h("p", { className: "muted" }, "Loading the active epoch's MCP launches…");
  const list = h("ul", { className: "protocol-sessions", "aria-label": "MCP sessions" });
  replace(
    container,
    h("div", { className: "protocol-view" }, h("h2", {}, "MCP protocol messages"), note, list),
  );
  try {
    const listed = await getJSON("/api/mcp/servers");
    const rows = listed.servers.flatMap((server) =>
      server.launches.map((launch) =>
        h(
          "li",
          {},
          h("a", { href: `/advanced/protocol?session=${encodeURIComponent(launch.launchId)}` }, launch.launchId),
          ` ${server.name} for ${launch.targets.join(", ")} (${launch.session.state})`,
        ),
      ),
    );
    replace(list, rows);
    note.textContent = rows.length ? "Choose a session:" : "The active epoch has no MCP servers.";
  } catch (error) {
    note.textContent = `MCP servers: ${error.message}`;
  }
}

export function mount(container, params) {
  const session = params.get("session") || "";
  if (!session) {
    chooser(container);
    return { unmount() {} };
  }
  let closed = false;
  let stream = null;
  let frame = 0;
  let lastSequence = 0;
  let server = "";
  const entries = [];
  const incoming = [];
  const expanded = new Set(); // sequences whose details row is open
  const settlements = new Settlements();
  const waiting = new Map(); // join key -> the cells of its request's row, until it settles
  let query = "";

  const heading = h("h2", {}, "Protocol messages");
  const back = h("a", { href: `/mcp?session=${encodeURIComponent(session)}` }, "MCP view of this session");
  const filter = h("input", {
    type: "search",
    size: 28,
    placeholder: "method or summary",
    "aria-label": "Filter messages",
  });
  const counts = h("span", { className: "muted counts", role: "status" });
  const gapNote = h("p", { className: "retention", hidden: true });
  const error = h("p", { className: "error", role: "alert" });
  const body = h("tbody");
  const table = h(
    "table",
    { className: "protocol-table", "aria-label": "Protocol messages" },
    h("thead", {}, h("tr", {}, COLUMNS.map((name) => h("th", { scope: "col" }, name)))),
    body,
  );
  const view = h(
    "div",
    { className: "protocol-view" },
    h("div", { className: "toolbar" }, heading, h("code", {}, session), back),
    h("div", { className: "toolbar" }, h("label", {}, "Filter ", filter), counts),
    gapNote,
    error,
    table,
  );
  replace(container, view);
  filter.addEventListener("input", () => {
    query = filter.value.trim().toLowerCase();
    render();
  });

  function passes(entry) {
    if (!query) return true;
    return `${methodOf(entry)}\n${entry.summary}\n${entry.kind}`.toLowerCase().includes(query);
  }

  function rows(entry) {
    const details = entry.details || {};
    const detailsId = `protocol-details-${entry.sequence}`;
    const open = expanded.has(entry.sequence);
    const toggle = h(
      "button",
      {
        type: "button",
        className: "expand",
        "aria-expanded": String(open),
        "aria-controls": detailsId,
        "aria-label": `Details of #${entry.sequence} ${methodOf(entry) || entry.kind}`,
      },
      open ? "▾" : "▸",
    );
    const extra = h(
      "tr",
      { id: detailsId, className: "protocol-details", hidden: !open },
      h("td", { colSpan: COLUMNS.length }, open ? detailsOf(entry) : null),
    );
    toggle.addEventListener("click", () => {
      const opening = !expanded.has(entry.sequence);
      if (opening) expanded.add(entry.sequence);
      else expanded.delete(entry.sequence);
      toggle.setAttribute("aria-expanded", String(opening));
      toggle.textContent = opening ? "▾" : "▸";
      extra.hidden = !opening;
      replace(extra.firstChild, opening ? detailsOf(entry) : null);
    });
    const status = statusOf(entry, settlements);
    const duration = settlements.duration(entry);
    const state = h("span", { className: "state", "data-state": status }, status);
    const ms = h("td", { className: "ms" }, duration === undefined ? "" : duration);
    const row = h(
      "tr",
      {
        className: `protocol-row${isErrorEntry(entry) || status === "error" ? " error" : ""}`,
        "data-sequence": entry.sequence,
        "data-kind": entry.kind,
        "data-method": methodOf(entry),
        "data-status": status,
      },
      h("td", {}, toggle),
      h("td", {}, entry.sequence),
      h("td", {}, time(entry.occurredAt)),
      h("td", {}, DIRECTIONS[details.direction] || ""),
      h("td", {}, entry.kind),
      h("td", { className: "method" }, methodOf(entry)),
      h("td", {}, details.jsonrpcId === undefined ? "" : String(details.jsonrpcId)),
      h("td", {}, state),
      ms,
      h("td", { className: "summary" }, entry.summary, replayable(entry) ? actions(entry) : null),
    );
    const id = entry.kind === "mcp.request" ? keyOf(entry) : null;
    if (status === "running" && id) waiting.set(id, { row, state, ms });
    return [row, extra];
  }

  /** A request's row takes its response's status and duration (trace-join.js). */
  function settle(id) {
    const cells = waiting.get(id);
    const response = settlements.responses.get(id);
    if (!cells || !response) return;
    waiting.delete(id);
    const status = response.status || "ok";
    cells.state.textContent = status;
    cells.state.dataset.state = status;
    cells.row.dataset.status = status;
    cells.row.classList.toggle("error", status === "error");
    cells.ms.textContent = response.durationMs === undefined ? "" : response.durationMs;
  }

  function actions(entry) {
    const note = h("span", { className: "muted replay-note", role: "status" });
    const again = h("button", { type: "button", className: "btn replay" }, "Replay");
    again.addEventListener("click", async () => {
      again.disabled = true;
      note.textContent = "Replaying…";
      try {
        note.textContent = await replay(session, entry);
      } catch (caught) {
        note.textContent = `Replay failed: ${caught.message}`;
      } finally {
        again.disabled = false;
      }
    });
    const edit = h("button", { type: "button", className: "btn edit-replay" }, "Edit and replay");
    edit.addEventListener("click", async () => {
      edit.disabled = true;
      try {
        const href = await editHref(session, entry);
        // Through the page's router: a link click it handles as navigation (app.js).
        const link = h("a", { href, hidden: true });
        view.append(link);
        link.click();
        link.remove();
      } catch (caught) {
        note.textContent = `Cannot edit: ${caught.message}`;
        edit.disabled = false;
      }
    });
    return h("span", { className: "protocol-actions" }, " ", again, " ", edit, " ", note);
  }

  function detailsOf(entry) {
    const correlation = Object.entries(entry.correlation || {});
    return h(
      "div",
      { className: "protocol-detail" },
      h(
        "dl",
        {},
        correlation.flatMap(([key, value]) => [
          h("dt", {}, key),
          h("dd", {}, h("a", { href: correlationHref(value, key), title: `The trace of ${key} ${value}` }, value)),
        ]),
      ),
      // The message first: what crossed the wire is what a reader opens a row for.
      messageView(entry),
      h("h4", {}, "Trace details"),
      h(
        "pre",
        { className: "details-json", tabIndex: 0, "aria-label": "Details JSON" },
        JSON.stringify(entry.details, null, 2),
      ),
    );
  }

  function render() {
    waiting.clear();
    const passing = entries.filter(passes);
    const shown = passing.slice(-SHOW);
    replace(body, shown.flatMap(rows));
    showCounts(passing.length, shown.length);
  }

  function showCounts(passing, shown) {
    const of = query ? `${passing} matching of ${entries.length}` : `${entries.length}`;
    counts.textContent = `${of} messages` + (shown < passing ? ` · the newest ${shown} shown` : "");
    view.dataset.count = String(shown);
  }

  function receive(item) {
    if (item.type === "trace.gap") {
      gapNote.hidden = false;
      gapNote.textContent = "Older trace entries are no longer kept: the first messages of this session may be gone.";
      return;
    }
    if (item.type !== "trace.entry") return;
    const entry = item.entry;
    if (entry.sequence <= lastSequence) return; // a resumed stream may repeat the edge
    lastSequence = entry.sequence;
    if (entry.source !== "mcp" || !entry.correlation || entry.correlation.mcpSessionId !== session) return;
    incoming.push(entry);
    if (!frame) frame = requestAnimationFrame(flush);
  }

  function flush() {
    frame = 0;
    if (closed || !incoming.length) return;
    const batch = incoming.splice(0);
    entries.push(...batch);
    const settled = batch.map((entry) => settlements.note(entry)).filter(Boolean);
    if (!server) {
      const named = batch.find((entry) => entry.details && entry.details.server);
      if (named) {
        server = named.details.server;
        heading.textContent = `Protocol messages of ${server}`;
      }
    }
    if (entries.length > KEEP) {
      entries.splice(0, entries.length - KEEP);
      render();
      return;
    }
    const passing = batch.filter(passes);
    const fragment = document.createDocumentFragment();
    for (const entry of passing) fragment.append(...rows(entry));
    body.append(fragment);
    for (const id of settled) settle(id);
    // The table keeps the newest SHOW rows (two <tr> each).
    while (body.childElementCount > SHOW * 2) {
      body.firstElementChild.remove();
      body.firstElementChild.remove();
    }
    const matching = query ? entries.filter(passes).length : entries.length;
    showCounts(matching, body.childElementCount / 2);
  }

  function start() {
    stream = followTrace({
      receive,
      replayed() {
        if (frame) cancelAnimationFrame(frame);
        flush();
        showCounts(entries.length, body.childElementCount / 2);
        view.dataset.ready = "true";
      },
      failed(caught) {
        error.textContent = `Could not load the trace: ${caught.message}`;
      },
    });
  }

  start();
  return {
    unmount() {
      closed = true;
      if (stream) stream.close();
      if (frame) cancelAnimationFrame(frame);
    },
  };
}
