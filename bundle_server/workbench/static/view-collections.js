// Collections of saved MCP calls, in the MCP view: the project's mcp-collections/*.json files
// (GET /api/mcp/collections), each with its calls and its last run against an epoch: per call
// `same`, `changed`, `new` or `failed`, and for a changed one the paths that changed since the
// previous epoch's run (added, removed, changed, with both values). Every new epoch re-runs
// them on the server; this panel follows the project events and shows the re-run once it has
// ended. Run, Export (the file as the project holds it), Delete and Import (a file, checked by
// the server before it is written) act on the project's files through the collection routes.
//
// Saved calls live in the project, not in this browser: a call saved from the tool form (its
// "Save call" form) goes to the collection `saved`, and what earlier versions of the page kept
// in localStorage (`bundle-devkit.mcp.saved.<server>`) moves there once, then leaves
// localStorage.
//
// Mounted by view-mcp.js with `mountCollections(viewElement, { selectedServer, callInForm })`:
// `selectedServer()` answers the server of the selected launch, and `callInForm({tool,
// arguments})` opens that tool's form with those arguments and calls it. It answers
// `saveCall({server, tool, arguments}, name)`, which the tool form's "Save call" uses. The
// panel ends itself when the view's element leaves the page.
import { ApiError, follow, getJSON, send } from "/assets/api.js";
import { h, replace } from "/assets/dom.js";

const LEGACY_KEY = "bundle-devkit.mcp.saved."; // what view-mcp.js stored before
const SAVED = "saved"; // the collection calls saved from the tool form go to
const POLL_MS = 300; // while a re-run is awaited
const AWAIT_MS = 120000; // how long a new epoch's re-runs are awaited

const STATUS_BADGE = { same: "badge-ok", changed: "badge-warn", new: "badge-info", failed: "badge-error" };

function message(error) {
  if (error instanceof ApiError) return error.code ? `${error.code}: ${error.message}` : `HTTP ${error.status}`;
  return String(error && error.message ? error.message : error);
}

function short(value) {
  const text = JSON.stringify(value);
  return text === undefined ? "" : text;
}

function collectionPath(name) {
  return `/api/mcp/collections/${encodeURIComponent(name)}`;
}

/** What a call asks, in a few words: `check_command {"command":"ls"}`, `safe-shell://rules`. */
function subject(call) {
  const params = call.params || {};
  if (call.method === "resources/read") return params.uri || "";
  const args = params.arguments && Object.keys(params.arguments).length ? ` ${short(params.arguments)}` : "";
  return `${params.name || ""}${args}`;
}

export function mountCollections(view, { selectedServer, callInForm } = {}) {
  let ended = false;
  let listed = [];
  const details = new Map(); // name -> {collection, run} last read
  const open = new Set(); // names whose calls are shown
  const wanted = new URLSearchParams(location.search).get("collection");
  if (wanted) open.add(wanted);
  let awaiting = null; // {epochId, until}
  let poll = 0;
  let chain = 0; // the newest check chain: an older one stops at its next step

  const status = h("p", { className: "muted", role: "status" });
  const error = h("p", { className: "error error-state", role: "alert" });
  const list = h("div", { className: "collections-list" });
  const importInput = h("input", {
    type: "file",
    accept: "application/json,.json",
    className: "visually-hidden",
    id: "collections-import",
    onchange: () => importFile(),
  });
  const section = h(
    "section",
    { className: "panel mcp-collections", "aria-labelledby": "mcp-collections-title" },
    h(
      "div",
      { className: "toolbar" },
      h("h3", { id: "mcp-collections-title" }, "Collections"),
      h("span", { className: "muted" }, "mcp-collections/ in the project, re-run on every new epoch"),
      h("label", { className: "btn", htmlFor: "collections-import" }, "Import…"),
      importInput,
      h("button", { type: "button", className: "btn", onclick: () => refresh() }, "Refresh"),
    ),
    status,
    error,
    list,
  );
  view.append(section);

  /** Save the tool form's last call as `name` in the `saved` collection; what to tell the user. */
  async function saveCall(call, name) {
    await saveCalls([
      { name, server: call.server, method: "tools/call", params: { name: call.tool, arguments: call.arguments || {} } },
    ]);
    return `Saved as ${name} in collection ${SAVED}.`;
  }

  /** Add `calls` to the `saved` collection (a call of the same name is replaced). */
  async function saveCalls(calls) {
    // Asked through the listing: a GET of a collection that is not there would be a 404 the
    // browser reports on its console.
    const listing = await getJSON("/api/mcp/collections");
    const exists = listing.collections.some((row) => row.name === SAVED);
    const current = exists ? await getJSON(collectionPath(SAVED)) : { calls: [] };
    const names = new Set(calls.map((call) => call.name));
    const next = { ...current, calls: [...current.calls.filter((call) => !names.has(call.name)), ...calls] };
    await send("PUT", collectionPath(SAVED), next);
    open.add(SAVED);
    await refresh();
  }

  /** Move what localStorage still holds into the project's `saved` collection, once. */
  async function migrate() {
    const keys = [];
    const calls = [];
    try {
      for (let index = 0; index < localStorage.length; index++) {
        const key = localStorage.key(index);
        if (!key || !key.startsWith(LEGACY_KEY)) continue;
        keys.push(key);
        const server = key.slice(LEGACY_KEY.length);
        const items = JSON.parse(localStorage.getItem(key) || "[]");
        for (const item of Array.isArray(items) ? items : []) {
          if (!item || typeof item.name !== "string" || typeof item.tool !== "string") continue;
          const name = calls.some((call) => call.name === item.name) ? `${server}-${item.name}` : item.name;
          calls.push({ name, server, method: "tools/call", params: { name: item.tool, arguments: item.arguments || {} } });
        }
      }
    } catch (caught) {
      return; // no localStorage here, or unreadable: nothing to move
    }
    if (!keys.length) return;
    try {
      if (calls.length) await saveCalls(calls);
      for (const key of keys) localStorage.removeItem(key);
      status.textContent = `Moved ${calls.length} saved call(s) from this browser into mcp-collections/${SAVED}.json.`;
    } catch (caught) {
      error.textContent = `Saved calls stay in this browser: ${message(caught)}`;
    }
  }

  async function refresh() {
    try {
      const answer = await getJSON("/api/mcp/collections");
      if (ended) return;
      listed = answer.collections;
      error.textContent = "";
      await Promise.all(listed.filter((row) => open.has(row.name) && !row.error).map((row) => load(row.name)));
      if (!ended) render();
    } catch (caught) {
      if (!ended) error.textContent = `Collections: ${message(caught)}`;
    }
  }

  async function load(name) {
    const [collection, runs] = await Promise.all([
      getJSON(collectionPath(name)),
      getJSON(`${collectionPath(name)}/runs`),
    ]);
    details.set(name, { collection, run: runs.runs[0] || null });
  }

  function render() {
    section.dataset.loaded = "true";
    if (!listed.length) {
      replace(
        list,
        h(
          "p",
          { className: "empty-state" },
          "No collections yet: call a tool and save the call, or import a collection file.",
        ),
      );
      return;
    }
    replace(list, listed.map(collectionItem));
  }

  function runBadge(last) {
    if (!last) return h("span", { className: "badge badge-info" }, "not run yet");
    if (last.state === "running") return h("span", { className: "badge badge-info loading" }, "running…");
    const counts = last.counts;
    const words = [];
    if (counts.changed) words.push(`${counts.changed} changed`);
    if (counts.failed) words.push(`${counts.failed} failed`);
    if (counts.new) words.push(`${counts.new} new`);
    if (counts.same) words.push(`${counts.same} same`);
    const kind = counts.failed ? "badge-error" : counts.changed ? "badge-warn" : "badge-ok";
    return h("span", { className: `badge ${kind}`, "data-run-state": "finished" }, words.join(", ") || "no calls");
  }

  function collectionItem(row) {
    const shown = open.has(row.name);
    const last = row.lastRun;
    const found = details.get(row.name);
    return h(
      "article",
      {
        className: "collection",
        "data-collection": row.name,
        "data-epoch": last ? last.epochId : "",
        "data-state": last ? last.state : "",
      },
      h(
        "div",
        { className: "toolbar" },
        h(
          "button",
          {
            type: "button",
            className: "btn collection-toggle",
            "aria-expanded": String(shown),
            onclick: () => toggle(row.name),
          },
          h("span", { "aria-hidden": "true" }, shown ? "▾ " : "▸ "),
          row.name,
        ),
        h("span", { className: "muted" }, `${row.calls} call${row.calls === 1 ? "" : "s"}`),
        row.error ? null : runBadge(last),
        last
          ? h(
              "span",
              { className: "muted" },
              `on ${last.epochId}${last.previousEpochId ? ` against ${last.previousEpochId}` : ""}`,
            )
          : null,
        h(
          "button",
          { type: "button", className: "btn btn-primary", disabled: Boolean(row.error), onclick: () => runNow(row.name) },
          "Run",
        ),
        h("a", { className: "btn", href: collectionPath(row.name), download: `${row.name}.json` }, "Export"),
        h("button", { type: "button", className: "btn btn-danger", onclick: () => remove(row.name) }, "Delete"),
      ),
      row.description ? h("p", { className: "muted" }, row.description) : null,
      row.error ? h("p", { className: "error error-state" }, `${row.error.code}: ${row.error.message}`) : null,
      shown && found ? callsTable(row.name, found) : null,
    );
  }

  function callsTable(name, { collection, run }) {
    const results = new Map(((run && run.calls) || []).map((call) => [call.name, call]));
    const rows = [];
    for (const call of collection.calls) {
      const result = results.get(call.name);
      rows.push(
        h(
          "tr",
          { className: "collection-call", "data-call": call.name, "data-status": result ? result.status : "" },
          h("td", {}, call.name),
          h("td", {}, h("code", {}, call.server)),
          h("td", {}, h("code", {}, `${call.method} ${subject(call)}`)),
          h(
            "td",
            {},
            result ? h("span", { className: `badge ${STATUS_BADGE[result.status] || ""}` }, result.status) : "—",
          ),
          h("td", { className: "num" }, result && result.durationMs !== undefined ? `${result.durationMs} ms` : ""),
          h(
            "td",
            { className: "actions" },
            call.method === "tools/call" && callInForm
              ? h(
                  "button",
                  { type: "button", className: "btn", "aria-label": `Call ${call.name} in the form`, onclick: () => inForm(call) },
                  "Call",
                )
              : null,
            h(
              "button",
              { type: "button", className: "btn", "aria-label": `Remove ${call.name} from ${name}`, onclick: () => removeCall(name, call.name) },
              "Remove",
            ),
          ),
        ),
      );
      if (result && result.status === "changed") rows.push(detailRow(call.name, diffList(result)));
      if (result && result.status === "failed" && result.failure) {
        rows.push(detailRow(call.name, h("p", { className: "error" }, `${result.failure.code}: ${result.failure.message}`)));
      }
    }
    return h(
      "table",
      { className: "collection-calls", "aria-label": `Calls of ${name}` },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Call", "Server", "Request", "Last run", "Time"].map((title) => h("th", {}, title)),
          h("th", {}, h("span", { className: "visually-hidden" }, "Actions")),
        ),
      ),
      h("tbody", {}, rows),
    );
  }

  function detailRow(name, content) {
    return h("tr", { className: "collection-detail", "data-call": name }, h("td", { colSpan: 6 }, content));
  }

  function diffList(result) {
    return h(
      "ul",
      { className: "collection-diff", "aria-label": `Changes of ${result.name}` },
      result.diff.map((change) =>
        h(
          "li",
          { className: `diff-${change.op}`, "data-path": change.path },
          h("span", { className: "diff-op" }, change.op),
          " ",
          h("code", {}, change.path || "/"),
          change.op === "changed"
            ? [" ", h("del", {}, short(change.before)), " → ", h("ins", {}, short(change.after))]
            : [" ", h(change.op === "added" ? "ins" : "del", {}, short(change.op === "added" ? change.after : change.before))],
        ),
      ),
      result.diffMore ? h("li", { className: "muted" }, `… and ${result.diffMore} more`) : null,
    );
  }

  function inForm(call) {
    const server = selectedServer ? selectedServer() : "";
    if (server !== call.server) {
      status.textContent = `Select a launch of ${call.server} above to call ${call.name} in its form.`;
      return;
    }
    status.textContent = "";
    callInForm({ tool: call.params.name, arguments: call.params.arguments || {} });
  }

  async function removeCall(name, callName) {
    try {
      const current = await getJSON(collectionPath(name));
      await send("PUT", collectionPath(name), { ...current, calls: current.calls.filter((c) => c.name !== callName) });
    } catch (caught) {
      error.textContent = `Remove ${callName}: ${message(caught)}`;
    }
    await refresh();
  }

  async function toggle(name) {
    if (open.has(name)) open.delete(name);
    else open.add(name);
    await refresh();
  }

  async function runNow(name) {
    status.textContent = `Running ${name} against the active epoch…`;
    try {
      const answer = await send("POST", `${collectionPath(name)}/runs`);
      const counts = answer.run.counts;
      status.textContent = `${name}: ${counts.same} same, ${counts.changed} changed, ${counts.new} new, ${counts.failed} failed.`;
      open.add(name);
    } catch (caught) {
      status.textContent = "";
      error.textContent = `Run ${name}: ${message(caught)}`;
    }
    await refresh();
  }

  async function remove(name) {
    if (!confirm(`Delete mcp-collections/${name}.json from the project?`)) return;
    try {
      await send("DELETE", collectionPath(name));
      open.delete(name);
      details.delete(name);
    } catch (caught) {
      error.textContent = `Delete ${name}: ${message(caught)}`;
    }
    await refresh();
  }

  async function importFile() {
    const file = importInput.files && importInput.files[0];
    importInput.value = "";
    if (!file) return;
    const name = file.name.replace(/\.json$/i, "");
    let data;
    try {
      data = JSON.parse(await file.text());
    } catch (caught) {
      error.textContent = `Import ${file.name}: not JSON (${message(caught)})`;
      return;
    }
    try {
      await send("PUT", collectionPath(name), data);
      status.textContent = `Imported ${file.name} as mcp-collections/${name}.json.`;
      error.textContent = "";
      open.add(name);
    } catch (caught) {
      error.textContent = `Import ${file.name}: ${message(caught)}`;
    }
    await refresh();
  }

  // A new epoch: the server re-runs every collection; read them again until each usable one
  // has a finished run of that epoch (or AWAIT_MS passed).
  // One check chain at a time: clearing `poll` stops only a chain waiting on its timer, not
  // one inside its `await refresh()`, so each chain carries its token and ends once it is not
  // the newest.
  function awaitEpoch(epochId) {
    awaiting = { epochId, until: Date.now() + AWAIT_MS };
    status.textContent = `Re-running the collections on ${epochId}…`;
    clearTimeout(poll);
    check(++chain);
  }

  function usable() {
    return listed.filter((row) => !row.error && row.calls > 0);
  }

  async function check(token) {
    if (ended || !awaiting || token !== chain) return;
    await refresh();
    if (ended || !awaiting || token !== chain) return;
    const done = usable().every(
      (row) => row.lastRun && row.lastRun.epochId === awaiting.epochId && row.lastRun.state === "finished",
    );
    if (done || Date.now() > awaiting.until) {
      status.textContent = done ? `Re-run on ${awaiting.epochId}.` : "";
      awaiting = null;
      return;
    }
    poll = setTimeout(() => check(token), POLL_MS);
  }

  // Only epochs adopted from now on: the stream from its start would replay every retained
  // artifact.available, each read here as a new epoch ("Re-running…" for an epoch long run).
  // The replay's latestSequence says where now is; the stream follows from there, so nothing
  // adopted between the two is missed. The replay's last adoption is the epoch at mount: its
  // re-runs are awaited only if they are under way or not begun (see `mounted`).
  let events = null;
  let mountEpoch = null;
  function followEvents(after) {
    if (ended) return;
    events = follow("/api/project/events/stream", {
      after,
      sequenceOf: (frame) => frame.sequence,
      onFrame: (frame) => {
        if (frame.type !== "artifact.available") return;
        const epoch = frame.payload && frame.payload.activeEpoch;
        if (epoch && epoch.id && !ended) awaitEpoch(epoch.id);
      },
    });
  }
  const following = getJSON("/api/project/events").then(
    (replay) => {
      const adopted = replay.events.filter(
        (e) => e.type === "artifact.available" && e.payload && e.payload.activeEpoch,
      );
      if (adopted.length) mountEpoch = adopted[adopted.length - 1].payload.activeEpoch.id;
      followEvents(replay.latestSequence);
    },
    () => followEvents(0), // unreadable now: from the start, as before (one chain still)
  );

  // After the first listing: a re-run of the epoch at mount that is under way, or not begun
  // (the epoch was adopted just before), is awaited as a new epoch's would be.
  function mounted() {
    if (ended || awaiting || !mountEpoch) return;
    const rows = usable();
    const running = rows.some((row) => row.lastRun && row.lastRun.state === "running");
    const begun = rows.some((row) => row.lastRun && row.lastRun.epochId === mountEpoch);
    if (rows.length && (running || !begun)) awaitEpoch(mountEpoch);
  }

  function end() {
    if (ended) return;
    ended = true;
    clearTimeout(poll);
    if (events) events.close();
    watcher.disconnect();
  }
  // The view goes (another view is shown): so does the panel.
  const watcher = new MutationObserver(() => {
    if (!section.isConnected) end();
  });
  if (view.parentNode) watcher.observe(view.parentNode, { childList: true });

  migrate()
    .finally(() => refresh())
    .then(() => following)
    .then(mounted);
  return { refresh, saveCall, unmount: end };
}
