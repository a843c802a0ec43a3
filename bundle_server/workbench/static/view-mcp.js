// MCP: the active epoch's MCP servers (GET /api/mcp/servers), each launch (the host kinds that
// start it the same way) with its session's state and, once open, what the server said to
// initialize. Connect runs `ping`, which opens the session. A selected launch
// (`/mcp?session=<launchId>`, kept in the address bar) lists its tools, resources and prompts;
// a tool's form is made from its inputSchema (a field per property of a simple type, JSON for
// the rest) and checked here before anything is sent; the outcome shows the result content,
// isError, the JSON-RPC error or the HTTP error. A call that succeeded can be saved (name and
// arguments) into the project's collection `saved` (view-collections.js, whose panel calls it
// again with one click).
// `&tool=<name>` / `&prompt=<name>` open that tool or prompt, `&args=<json>` fills the tool's
// form (kept in the address bar as it is typed). A tool with an MCP App
// (`_meta.ui.resourceUri`) shows the App during each call (app-preview.js: a frame of the App
// frame origin, bound to the call), with the binding's state and a Cancel.
// Each call names itself (`operationId`): while it runs, its progress is read from
// GET .../operations/<operationId> (the server's notifications/progress) and its Cancel posts
// .../cancel (the call then answers cancelled, the session kept); a time limit of its own
// goes as `timeoutMs`. The selected session can be disconnected and restarted. A launch the
// active epoch does not have (a link of a past epoch, or the one shown when a new epoch
// comes) is followed to the active epoch's launch of the same server (GET
// /api/mcp/sessions/<id>), keeping the tool, the prompt and what was typed.
import { ApiError, follow, getJSON, postJSON } from "/assets/api.js";
import { mountApp } from "/assets/app-preview.js";
import { h, replace } from "/assets/dom.js";
import { mountCollections } from "/assets/view-collections.js";
import { mountServerRequests } from "/assets/view-mcp-requests.js";

export const title = "MCP";

const MAX_PAGES = 20; // list pages followed per listing (nextCursor)
const CORRELATION_MAX = 256; // limit tools-call-correlation-id
const CALL_TIME = { min: 100, max: 600000 }; // limit mcp-call-time (ms)
const PROGRESS_POLL = 250; // ms between reads of a call's progress while it runs
const SIMPLE = ["string", "number", "integer", "boolean"];

function pretty(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

function message(error) {
  if (error instanceof ApiError) {
    return error.code ? `${error.code}: ${error.message}` : `HTTP ${error.status}: ${error.message}`;
  }
  return String(error && error.message ? error.message : error);
}

/** The UI resource of a tool with an MCP App (`_meta.ui.resourceUri`), or "". */
function appResource(tool) {
  const meta = tool && isObject(tool._meta) ? tool._meta : {};
  const ui = isObject(meta.ui) ? meta.ui.resourceUri : meta["ui/resourceUri"];
  return typeof ui === "string" && ui.startsWith("ui://") ? ui : "";
}

/** The `args` query (a JSON object) as a form's filling, or null. */
function argumentsOf(text) {
  if (!text) return null;
  try {
    const parsed = JSON.parse(text);
    return isObject(parsed) ? { arguments: parsed } : null;
  } catch (error) {
    return null;
  }
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// --- Forms from JSON Schema ---

/** How a property is edited: one of SIMPLE, `enum`, or `json` (objects, arrays, the rest). */
export function fieldKind(schema) {
  if (!isObject(schema)) return "json";
  if (
    Array.isArray(schema.enum) &&
    schema.enum.length &&
    schema.enum.every((value) => ["string", "number", "boolean"].includes(typeof value))
  ) {
    return "enum";
  }
  let type = schema.type;
  if (Array.isArray(type)) {
    const real = type.filter((t) => t !== "null");
    type = real.length === 1 ? real[0] : undefined;
  }
  if (type === undefined) {
    // Optional[X] as a schema generator writes it: anyOf [X, null].
    const options = schema.anyOf || schema.oneOf;
    if (Array.isArray(options)) {
      const real = options.filter((option) => !(isObject(option) && option.type === "null"));
      if (real.length === 1) return fieldKind(real[0]);
    }
  }
  return SIMPLE.includes(type) ? type : "json";
}

function typeOf(schema) {
  if (!isObject(schema)) return "any";
  if (typeof schema.type === "string") return schema.type;
  if (Array.isArray(schema.type)) return schema.type.join(" | ");
  return "JSON";
}

/** One field of a generated form: `element` to show, `read()` -> {value} | {missing} | {error},
 * `write(value)`, `invalid(text)` to show an error at it. */
function makeField(id, name, schema, required) {
  const kind = fieldKind(schema);
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const description = isObject(schema) && typeof schema.description === "string" ? schema.description : "";
  let control;
  if (kind === "boolean" || kind === "enum") {
    const values = kind === "boolean" ? [true, false] : schema.enum;
    control = h(
      "select",
      { id },
      h("option", { value: "" }, "(not set)"),
      values.map((value, index) => h("option", { value: String(index) }, String(value))),
    );
    control.dataset.values = JSON.stringify(values);
  } else if (kind === "json") {
    control = h("textarea", { id, rows: 3, placeholder: `JSON ${typeOf(schema)}` });
    control.spellcheck = false;
  } else {
    control = h("input", { id, type: "text", autocomplete: "off" });
    if (kind !== "string") control.inputMode = kind === "integer" ? "numeric" : "decimal";
  }
  control.name = name;
  control.setAttribute("aria-describedby", description ? `${hintId} ${errorId}` : errorId);
  if (required) control.setAttribute("aria-required", "true");
  const error = h("p", { id: errorId, className: "error", role: "alert" });
  const element = h(
    "div",
    { className: "field", "data-field": name, "data-kind": kind },
    h(
      "div",
      { className: "field-head" },
      h("label", { htmlFor: id }, name),
      h("span", { className: "muted field-type" }, kind === "json" ? typeOf(schema) : kind),
      required ? h("span", { className: "badge required" }, "required") : null,
    ),
    control,
    description ? h("p", { id: hintId, className: "muted hint" }, description) : null,
    error,
  );
  const values = control.dataset.values ? JSON.parse(control.dataset.values) : null;

  function clear() {
    control.removeAttribute("aria-invalid");
    error.textContent = "";
  }
  control.addEventListener("input", clear);
  control.addEventListener("change", clear);

  function read() {
    const text = control.value;
    if (kind === "string") {
      if (text === "") return required ? { error: "required" } : { missing: true };
      return { value: text };
    }
    if (!text.trim()) return required ? { error: "required" } : { missing: true };
    if (values) return { value: values[Number(text)] };
    if (kind === "number" || kind === "integer") {
      const number = Number(text.trim());
      if (!Number.isFinite(number)) return { error: `not a number: ${text.trim()}` };
      if (kind === "integer" && !Number.isInteger(number)) return { error: `not an integer: ${text.trim()}` };
      return { value: number };
    }
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (caught) {
      return { error: `not JSON: ${caught.message}` };
    }
    const type = isObject(schema) ? schema.type : undefined;
    if (type === "object" && !isObject(parsed)) return { error: "must be a JSON object" };
    if (type === "array" && !Array.isArray(parsed)) return { error: "must be a JSON array" };
    return { value: parsed };
  }

  function write(value) {
    clear();
    if (value === undefined) control.value = "";
    else if (values) {
      const index = values.findIndex((candidate) => candidate === value);
      control.value = index >= 0 ? String(index) : "";
    } else if (kind === "json") control.value = pretty(value);
    else control.value = String(value);
  }

  function invalid(text) {
    control.setAttribute("aria-invalid", "true");
    error.textContent = `${name}: ${text}`;
  }

  if (isObject(schema) && schema.default !== undefined) write(schema.default);
  return { name, element, control, read, write, invalid };
}

/** The fields of an object schema: one per property, or (a schema without properties) one JSON
 * object field for all the arguments (`whole`). */
function schemaFields(prefix, schema) {
  if (isObject(schema) && isObject(schema.properties)) {
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    return {
      whole: false,
      fields: Object.entries(schema.properties).map(([name, property], index) =>
        makeField(`${prefix}-${index}`, name, property, required.has(name)),
      ),
    };
  }
  return { whole: true, fields: [makeField(`${prefix}-all`, "arguments", { type: "object" }, false)] };
}

/** Read every field: {arguments} or {invalid: first field in error} (each one marked). */
function readFields(form) {
  const values = {};
  let first = null;
  for (const field of form.fields) {
    const read = field.read();
    if (read.error) {
      field.invalid(read.error);
      first = first || field;
    } else if (!read.missing) {
      values[field.name] = read.value;
    }
  }
  if (first) return { invalid: first };
  if (form.whole) return { arguments: values.arguments || {} };
  return { arguments: values };
}

function writeFields(form, values) {
  if (form.whole) {
    form.fields[0].write(values);
    return;
  }
  for (const field of form.fields) field.write(isObject(values) ? values[field.name] : undefined);
}

// --- Showing what a server answered ---

function contentItem(item) {
  if (!isObject(item)) return h("pre", { className: "details-json" }, pretty(item));
  if (item.type === "text") return h("pre", { className: "mcp-text" }, String(item.text));
  if (item.type === "image" || item.type === "audio") {
    const size = typeof item.data === "string" ? `${item.data.length} base64 characters` : "no data";
    return h("p", { className: "muted" }, `${item.type} ${item.mimeType || ""} (${size})`);
  }
  if (item.type === "resource" && isObject(item.resource)) {
    return h(
      "div",
      { className: "mcp-embedded" },
      h("p", { className: "muted" }, `resource ${item.resource.uri || ""}`),
      resourceContent(item.resource),
    );
  }
  return h("pre", { className: "details-json" }, pretty(item));
}

function resourceContent(content) {
  if (typeof content.text === "string") return h("pre", { className: "mcp-text" }, content.text);
  if (typeof content.blob === "string") {
    return h("p", { className: "muted" }, `binary (${content.blob.length} base64 characters)`);
  }
  return h("pre", { className: "details-json" }, pretty(content));
}

function rawBlock(label, value) {
  return h(
    "details",
    { className: "raw" },
    h("summary", {}, label),
    h("pre", { className: "details-json", tabIndex: 0 }, pretty(value)),
  );
}

/** The outcome of an operation (or the HTTP error that stood for it), in `box`. */
function showOutcome(box, outcome, failure, extra) {
  if (failure) {
    box.dataset.status = "http-error";
    replace(
      box,
      h("p", {}, h("strong", { className: "outcome-status" }, "request failed"), ` ${message(failure)}`),
      failure instanceof ApiError ? h("p", { className: "muted" }, `HTTP ${failure.status}`) : null,
    );
    box.hidden = false;
    return;
  }
  const meta = h(
    "p",
    { className: "muted outcome-meta" },
    `${outcome.method} · ${outcome.mcpRequestId} · ${outcome.durationMs} ms`,
    extra && extra.correlationId ? ` · correlation ${extra.correlationId}` : "",
    " · ",
    h("a", { className: "outcome-logs", href: `/logs?correlation=${encodeURIComponent(outcome.mcpRequestId)}` }, "server output"),
  );
  if (outcome.cancelled) {
    box.dataset.status = "cancelled";
    replace(
      box,
      h("p", {}, h("strong", { className: "outcome-status" }, "cancelled"), ` ${outcome.cancelled.reason}`),
      meta,
    );
  } else if (outcome.error) {
    box.dataset.status = "rpc-error";
    replace(
      box,
      h(
        "p",
        {},
        h("strong", { className: "outcome-status" }, `JSON-RPC error ${outcome.error.code}`),
        ` ${outcome.error.message}`,
      ),
      meta,
      outcome.error.data !== undefined ? h("pre", { className: "details-json" }, pretty(outcome.error.data)) : null,
    );
  } else {
    const result = outcome.result;
    const failed = isObject(result) && result.isError === true;
    box.dataset.status = failed ? "tool-error" : "ok";
    const content = isObject(result) && Array.isArray(result.content) ? result.content : null;
    replace(
      box,
      h(
        "p",
        {},
        h(
          "strong",
          { className: "outcome-status" },
          failed ? "isError: the tool reported an error" : "result",
        ),
      ),
      meta,
      content
        ? h(
            "div",
            { className: "mcp-content", "aria-label": "Result content" },
            content.length ? content.map(contentItem) : h("p", { className: "muted" }, "no content"),
          )
        : h("pre", { className: "details-json" }, pretty(result)),
      isObject(result) && result.structuredContent !== undefined
        ? h(
            "div",
            {},
            h("h5", {}, "Structured content"),
            h("pre", { className: "details-json" }, pretty(result.structuredContent)),
          )
        : null,
      content ? rawBlock("Raw result", result) : null,
    );
  }
  box.hidden = false;
}

function infoList(rows) {
  const present = rows.filter(([, value]) => value !== undefined && value !== null && value !== "");
  return h(
    "dl",
    { className: "mcp-info" },
    present.flatMap(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]),
  );
}

export function mount(container, params) {
  let unmounted = false;
  let listed = null; // the last McpServerList
  let listedText = "";
  const launchErrors = new Map(); // launchId -> text of its last Connect failure
  const connecting = new Set();
  // What is selected, and a counter so a slow answer for an earlier choice is dropped.
  // Query keys read: session, tool, prompt, and args (the tool form's arguments, a JSON
  // object: how a link, a reload or "Edit and replay" fills the form).
  const chosen = {
    session: params.get("session") || "",
    tool: params.get("tool") || "",
    prompt: params.get("prompt") || "",
    args: params.get("args") || "",
  };
  // What the next tool form opened is filled with: {arguments} (a link's args) or {raw} (what
  // was typed, kept when the form is made again for the active epoch's launch).
  let pendingForm = argumentsOf(chosen.args);
  let promptForm = chosen.prompt ? argumentsOf(chosen.args) : null; // a prompt link's args, once
  let following = ""; // the launch of a past epoch being followed to the active epoch
  let selection = 0;
  let tools = [];
  let prompts = [];
  let toolForm = null; // {tool, fields, whole, outcome box, ...}
  let preview = null; // the App preview of the last call of a tool with an App

  const serverRequests = mountServerRequests(() => chosen.session); // view-mcp-requests.js
  const epochLine = h("span", { className: "muted" });
  const refresh = h("button", { type: "button", onclick: () => loadServers() }, "Refresh");
  const error = h("p", { className: "error", role: "alert" });
  const serverList = h("div", { className: "mcp-servers", "aria-label": "MCP servers" });
  const panel = h("section", { className: "mcp-session", "aria-labelledby": "mcp-session-title", hidden: true });
  const hint = h(
    "p",
    { className: "muted" },
    "Select a launch to list its tools, resources and prompts (its session opens: the server starts).",
  );
  replace(
    container,
    h(
      "div",
      { className: "mcp-view" },
      h("div", { className: "toolbar" }, h("h2", {}, "MCP servers"), epochLine, refresh),
      error,
      h("div", { className: "mcp-layout" }, serverList, h("div", {}, serverRequests.element, hint, panel)),
    ),
  );

  function launchOf(id) {
    for (const server of (listed && listed.servers) || []) {
      for (const launch of server.launches) if (launch.launchId === id) return { server, launch };
    }
    return null;
  }

  function syncUrl() {
    const query = new URLSearchParams();
    if (chosen.session) query.set("session", chosen.session);
    if (chosen.session && chosen.tool) query.set("tool", chosen.tool);
    if (chosen.session && chosen.prompt) query.set("prompt", chosen.prompt);
    if (chosen.session && chosen.tool && chosen.args) query.set("args", chosen.args);
    const url = `/mcp${query.toString() ? `?${query}` : ""}`;
    if (url !== location.pathname + location.search) history.replaceState(null, "", url);
  }

  async function operate(launchId, method, params_, extra) {
    const body = { method };
    if (params_ !== undefined) body.params = params_;
    Object.assign(body, extra || {});
    const answer = await postJSON(`/api/mcp/sessions/${encodeURIComponent(launchId)}/operations`, body);
    return answer.outcome;
  }

  // --- Servers and launches ---

  async function loadServers() {
    try {
      const answer = await getJSON("/api/mcp/servers");
      if (unmounted) return;
      error.textContent = "";
      const text = JSON.stringify(answer);
      if (text === listedText) return;
      listed = answer;
      listedText = text;
      renderServers();
    } catch (caught) {
      if (!unmounted) error.textContent = `MCP servers: ${message(caught)}`;
    }
  }

  function renderServers() {
    // The list is made again: keep the keyboard focus on the same control.
    const focused = document.activeElement && serverList.contains(document.activeElement)
      ? document.activeElement.dataset.key
      : null;
    const servers = listed.servers || [];
    epochLine.textContent = listed.epochId ? `epoch ${listed.epochId}` : "no active epoch";
    replace(
      serverList,
      servers.length
        ? servers.map(serverSection)
        : h(
            "p",
            { className: "muted" },
            listed.epochId
              ? "The active epoch declares no MCP servers (mcpServers in the project's config)."
              : "No epoch is active yet: the project has not built.",
          ),
    );
    if (chosen.session && !panel.hidden && !launchOf(chosen.session)) followLaunch(chosen.session);
    if (focused) {
      const again = serverList.querySelector(`[data-key="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }

  function serverSection(server) {
    const titleId = `mcp-server-${server.name}`;
    return h(
      "section",
      { className: "mcp-server", "data-server": server.name, "aria-labelledby": titleId },
      h(
        "h3",
        { id: titleId },
        server.name,
        " ",
        h("span", { className: "muted" }, `${server.kind} · ${server.transport}`),
      ),
      h("ul", { className: "mcp-launches" }, server.launches.map((launch) => launchItem(server, launch))),
    );
  }

  function launchItem(server, launch) {
    const session = launch.session || { state: "closed" };
    const open = session.state === "open";
    const id = launch.launchId;
    const busy = connecting.has(id);
    const info = session.serverInfo || {};
    const capabilities = Object.keys(session.capabilities || {});
    return h(
      "li",
      {
        className: "mcp-launch",
        "data-launch": id,
        "data-server": server.name,
        "data-state": session.state,
        "aria-current": chosen.session === id ? "true" : null,
      },
      h(
        "div",
        { className: "toolbar" },
        h("span", { className: "state", "data-state": session.state }, session.state),
        h("code", {}, id),
        h("span", { className: "muted" }, `for ${launch.targets.join(", ")}`),
        h(
          "button",
          {
            type: "button",
            "data-key": `select:${id}`,
            "aria-pressed": String(chosen.session === id),
            onclick: () => select(id, {}),
          },
          "Select",
        ),
        h(
          "button",
          { type: "button", "data-key": `connect:${id}`, disabled: busy, onclick: () => connect(id) },
          busy ? "Connecting…" : open ? "Ping" : "Connect",
        ),
        h("a", { href: `/advanced/protocol?session=${encodeURIComponent(id)}` }, "Protocol"),
      ),
      open
        ? infoList([
            ["Server", [info.name, info.version].filter(Boolean).join(" ") || undefined],
            ["Title", info.title],
            ["Protocol version", session.protocolVersion],
            [
              "Capabilities",
              capabilities.length
                ? h(
                    "span",
                    { className: "capabilities" },
                    capabilities.join(", "),
                    " ",
                    rawBlock("as sent", session.capabilities),
                  )
                : "none",
            ],
            ["Instructions", session.instructions],
          ])
        : null,
      launchErrors.has(id) ? h("p", { className: "error", role: "alert" }, launchErrors.get(id)) : null,
    );
  }

  async function connect(id) {
    connecting.add(id);
    launchErrors.delete(id);
    renderServers();
    try {
      await operate(id, "ping");
    } catch (caught) {
      launchErrors.set(id, `Connect: ${message(caught)}`);
    }
    connecting.delete(id);
    if (unmounted) return;
    listedText = ""; // render again even if nothing else moved: the button and the error did
    await loadServers();
  }

  // --- The selected launch ---

  const sessionTitle = h("h3", { id: "mcp-session-title" });
  const sessionNote = h("p", { className: "muted", role: "status" });
  const protocolLink = h("a", {}, "Protocol messages of this session");
  const disconnectButton = h(
    "button",
    { type: "button", className: "btn", onclick: () => sessionAction("disconnect") },
    "Disconnect",
  );
  const restartButton = h(
    "button",
    { type: "button", className: "btn", onclick: () => sessionAction("restart") },
    "Restart",
  );
  const toolsList = h("ul", { className: "mcp-items mcp-tool-list", "aria-label": "Tools" });
  const toolSearch = h("input", {
    type: "search",
    autocomplete: "off",
    placeholder: "Search tools",
    "aria-label": "Search tools",
    hidden: true,
    oninput: () => renderTools(),
  });
  const toolCount = h("span", { className: "muted", role: "status" });
  const toolPane = h("div", { className: "mcp-tool" });
  const resourcesList = h("ul", { className: "mcp-items", "aria-label": "Resources" });
  const templatesList = h("ul", { className: "mcp-templates", "aria-label": "Resource templates" });
  const resourceBox = h("section", { className: "mcp-resource", "aria-label": "Resource contents", hidden: true });
  const promptsList = h("ul", { className: "mcp-items", "aria-label": "Prompts" });
  const promptPane = h("div", { className: "mcp-prompt" });
  replace(
    panel,
    h(
      "div",
      { className: "details-head" },
      sessionTitle,
      h("div", { className: "toolbar", role: "group", "aria-label": "Session" }, disconnectButton, restartButton, protocolLink),
    ),
    sessionNote,
    h(
      "div",
      { className: "mcp-columns" },
      h(
        "section",
        { className: "mcp-tools", "aria-labelledby": "mcp-tools-title" },
        h("div", { className: "toolbar" }, h("h4", { id: "mcp-tools-title" }, "Tools"), toolSearch, toolCount),
        toolsList,
        toolPane,
      ),
      h(
        "div",
        {},
        h(
          "section",
          { className: "mcp-resources", "aria-labelledby": "mcp-resources-title" },
          h("h4", { id: "mcp-resources-title" }, "Resources"),
          resourcesList,
          templatesList,
          resourceBox,
        ),
        h(
          "section",
          { className: "mcp-prompts", "aria-labelledby": "mcp-prompts-title" },
          h("h4", { id: "mcp-prompts-title" }, "Prompts"),
          promptsList,
          promptPane,
        ),
      ),
    ),
  );

  function serverName() {
    const found = launchOf(chosen.session);
    return found ? found.server.name : "";
  }

  /** Disconnect (its server process ends, its calls end cancelled) or restart (it starts
   * afresh) the selected launch's session. */
  async function sessionAction(action) {
    const id = chosen.session;
    disconnectButton.disabled = restartButton.disabled = true;
    sessionNote.textContent =
      action === "restart" ? "Restarting the session (the server starts afresh)…" : "Disconnecting the session…";
    try {
      const { session } = await postJSON(`/api/mcp/sessions/${encodeURIComponent(id)}/${action}`);
      if (unmounted || chosen.session !== id) return;
      sessionNote.textContent =
        action === "restart"
          ? `Session restarted · protocol ${session.session.protocolVersion || "?"}`
          : "Session disconnected: the server process ended; the next call opens it again.";
    } catch (caught) {
      if (unmounted || chosen.session !== id) return;
      sessionNote.textContent = `${action === "restart" ? "Restart" : "Disconnect"}: ${message(caught)}`;
    } finally {
      disconnectButton.disabled = restartButton.disabled = false;
    }
    listedText = "";
    await loadServers();
  }

  /** A launch of a past epoch (a link, or the launch shown when a new epoch came): the
   * server names the active epoch's launch of the same server for the same host kinds, and
   * the view selects it, keeping the tool, the prompt and what was typed. */
  async function followLaunch(old) {
    if (following === old) return;
    following = old;
    const mine = selection;
    const form = toolForm ? { raw: rawValues(toolForm) } : pendingForm;
    try {
      const { session } = await getJSON(`/api/mcp/sessions/${encodeURIComponent(old)}`);
      if (unmounted || chosen.session !== old || mine !== selection) return;
      if (!launchOf(session.launchId)) {
        listedText = "";
        await loadServers();
        if (unmounted || chosen.session !== old) return;
      }
      following = "";
      select(session.launchId, { tool: chosen.tool, prompt: chosen.prompt, form, followedFrom: old });
    } catch (caught) {
      if (unmounted || chosen.session !== old) return;
      sessionNote.textContent = `${old} is not a launch of the active epoch${
        listed && listed.epochId ? ` (${listed.epochId})` : ""
      }: ${message(caught)}. Select one above.`;
    } finally {
      if (following === old) following = "";
    }
  }

  async function select(id, { tool = "", prompt = "", form = null, followedFrom = "" }) {
    const mine = ++selection;
    // Selecting the launch shown again lists everything afresh, keeping the tool and prompt.
    const same = (chosen.session === id || followedFrom) && !panel.hidden;
    if (same && toolForm && !form) form = { raw: rawValues(toolForm) };
    chosen.session = id;
    chosen.tool = tool || (same ? chosen.tool : "");
    chosen.prompt = prompt || (same ? chosen.prompt : "");
    if (!chosen.tool) chosen.args = "";
    if (form) pendingForm = form;
    syncUrl();
    if (listed) renderServers();
    tools = [];
    prompts = [];
    toolForm = null;
    panel.hidden = false;
    panel.dataset.loaded = "false";
    hint.hidden = true;
    protocolLink.href = `/advanced/protocol?session=${encodeURIComponent(id)}`;
    for (const list of [toolsList, resourcesList, promptsList]) {
      replace(list, h("li", { className: "muted" }, "loading…"));
    }
    replace(templatesList);
    replace(toolPane);
    replace(promptPane);
    resourceBox.hidden = true;
    panel.dataset.launch = id;
    const found = launchOf(id);
    if (!found) {
      sessionTitle.textContent = id;
      for (const list of [toolsList, resourcesList, promptsList]) replace(list);
      if (!listed) {
        sessionNote.textContent = "The servers could not be listed.";
        return;
      }
      sessionNote.textContent = `Looking for ${id} in the active epoch…`;
      followLaunch(id);
      return;
    }
    sessionTitle.textContent = `${found.server.name} · ${id}`;
    if (followedFrom) {
      sessionNote.textContent = `${followedFrom} was a launch of a past epoch: this is the same server in the active one.`;
    }
    if (found.launch.session.state !== "open") {
      sessionNote.textContent = `${followedFrom ? `Followed ${followedFrom} to the active epoch. ` : ""}Opening the session (the server starts)…`;
      try {
        await operate(id, "ping");
      } catch (caught) {
        if (mine !== selection || unmounted) return;
        sessionNote.textContent = `The session did not open: ${message(caught)}`;
        for (const list of [toolsList, resourcesList, promptsList]) replace(list);
        loadServers();
        return;
      }
      if (mine !== selection || unmounted) return;
      await loadServers();
      if (mine !== selection || unmounted) return;
    }
    const now = launchOf(id);
    const session = (now && now.launch.session) || {};
    const capabilities = session.capabilities || {};
    sessionNote.textContent =
      (followedFrom ? `Followed ${followedFrom} (a past epoch) to this launch. ` : "") +
      (session.state === "open" ? `Session open · protocol ${session.protocolVersion || "?"}` : "");
    await Promise.all([
      capabilities.tools ? loadTools(id, mine) : offersNone(toolsList, "tools"),
      capabilities.resources ? loadResources(id, mine) : offersNone(resourcesList, "resources"),
      capabilities.prompts ? loadPrompts(id, mine) : offersNone(promptsList, "prompts"),
    ]);
    if (mine === selection && !unmounted) panel.dataset.loaded = "true";
  }

  function offersNone(list, what) {
    replace(list, h("li", { className: "muted" }, `The server offers no ${what}.`));
  }

  /** Every page of a listing: the items under `key`, or throws the failure. */
  async function listAll(id, method, key) {
    const items = [];
    let cursor;
    for (let page = 0; page < MAX_PAGES; page++) {
      const outcome = await operate(id, method, cursor ? { cursor } : undefined);
      if (outcome.error) throw new Error(`JSON-RPC error ${outcome.error.code}: ${outcome.error.message}`);
      const result = outcome.result || {};
      items.push(...(Array.isArray(result[key]) ? result[key] : []));
      cursor = typeof result.nextCursor === "string" && result.nextCursor ? result.nextCursor : undefined;
      if (!cursor) break;
    }
    return items;
  }

  // --- Tools ---

  async function loadTools(id, mine) {
    try {
      const found = await listAll(id, "tools/list", "tools");
      if (mine !== selection || unmounted) return;
      tools = found.filter((tool) => isObject(tool) && typeof tool.name === "string");
      renderTools();
      if (chosen.tool) {
        const filling = pendingForm;
        pendingForm = null;
        if (tools.some((tool) => tool.name === chosen.tool)) openTool(chosen.tool, filling);
        else replace(toolPane, h("p", { className: "error" }, `The server lists no tool ${chosen.tool}.`));
      }
    } catch (caught) {
      if (mine === selection && !unmounted) {
        replace(toolsList, h("li", { className: "error" }, `tools/list: ${message(caught)}`));
      }
    }
  }

  /** The tools whose name, title or description holds every word of the search box. */
  function searched() {
    const words = toolSearch.value.toLowerCase().split(/\s+/).filter(Boolean);
    return tools.filter((tool) => {
      const text = [tool.name, tool.title, tool.description].filter(Boolean).join(" ").toLowerCase();
      return words.every((word) => text.includes(word));
    });
  }

  function renderTools() {
    toolSearch.hidden = tools.length < 2;
    const shown = searched();
    toolCount.textContent =
      tools.length && shown.length !== tools.length ? `${shown.length} of ${tools.length} tools` : "";
    replace(
      toolsList,
      !tools.length
        ? h("li", { className: "muted" }, "The server lists no tools.")
        : !shown.length
          ? h("li", { className: "muted empty-state" }, `No tool matches "${toolSearch.value}".`)
          : shown.map((tool) => {
              const app = appResource(tool);
              return h(
                "li",
                { "data-tool": tool.name, "data-app": app ? "true" : null },
                h(
                  "button",
                  {
                    type: "button",
                    className: "mcp-pick",
                    "aria-pressed": String(chosen.tool === tool.name),
                    "data-name": tool.name,
                    onclick: () => openTool(tool.name),
                  },
                  tool.name,
                ),
                app
                  ? h("span", { className: "badge badge-info mcp-app-mark", title: `MCP App: ${app}` }, "App")
                  : null,
                tool.description ? h("span", { className: "muted mcp-tool-description" }, ` ${tool.description}`) : null,
              );
            }),
    );
  }

  function openTool(name, values) {
    const tool = tools.find((candidate) => candidate.name === name);
    if (!tool) return null;
    if (values && values.arguments) chosen.args = JSON.stringify(values.arguments);
    else if (chosen.tool !== name) chosen.args = "";
    chosen.tool = name;
    syncUrl();
    for (const button of toolsList.querySelectorAll("button.mcp-pick")) {
      button.setAttribute("aria-pressed", String(button.dataset.name === name));
    }
    const generated = schemaFields("mcp-arg", tool.inputSchema);
    const correlation = h("input", {
      id: "mcp-correlation",
      type: "text",
      autocomplete: "off",
      maxLength: CORRELATION_MAX,
      placeholder: "none",
    });
    const formError = h("p", { className: "error", role: "alert" });
    const outcome = h("section", { className: "mcp-outcome", "aria-label": "Outcome", hidden: true });
    // A tool with an App (MCP Apps: _meta.ui.resourceUri) shows it beside the call.
    const resourceUri = appResource(tool);
    const timeLimit = h("input", {
      id: "mcp-time-limit",
      type: "text",
      inputMode: "numeric",
      autocomplete: "off",
      placeholder: "the server's default",
      "aria-describedby": "mcp-time-limit-error",
    });
    const timeLimitError = h("p", { id: "mcp-time-limit-error", className: "error", role: "alert" });
    timeLimit.addEventListener("input", () => {
      timeLimit.removeAttribute("aria-invalid");
      timeLimitError.textContent = "";
    });
    const appState = h("span", { className: "app-state", role: "status" });
    const appCancel = h("button", { type: "button", disabled: true, onclick: () => cancelApp() }, "Cancel call");
    const appNote = h("p", { className: "muted app-note" }, resourceUri ? `UI resource ${resourceUri}; it shows during the next call.` : "");
    const appPane = h(
      "section",
      { className: "mcp-app", "aria-label": "App preview", hidden: !resourceUri },
      h("div", { className: "toolbar" }, h("h5", {}, "App"), appState, appCancel),
      appNote,
    );
    const save = h("form", { className: "toolbar save-call", hidden: true, onsubmit: (event) => saveCall(event) });
    const call = h("button", { type: "submit", className: "btn btn-primary" }, "Call");
    const cancel = h(
      "button",
      { type: "button", className: "btn btn-danger", disabled: true, onclick: () => cancelCall(toolForm) },
      "Cancel",
    );
    const progressBar = h("progress", { "aria-label": `Progress of ${name}` });
    const progressText = h("span", { className: "muted mcp-progress-text" });
    const progress = h(
      "div",
      { className: "mcp-progress", role: "status", "aria-label": "Call progress", hidden: true },
      progressBar,
      " ",
      progressText,
    );
    const form = h(
      "form",
      {
        className: "mcp-form",
        "aria-label": `Call ${name}`,
        noValidate: true,
        onsubmit: (event) => submitTool(event),
        oninput: () => rememberArguments(),
      },
      generated.fields.map((field) => field.element),
      generated.fields.length ? null : h("p", { className: "muted" }, "This tool takes no arguments."),
      h(
        "div",
        { className: "field" },
        h("label", { htmlFor: "mcp-correlation" }, "Correlation id (optional)"),
        correlation,
      ),
      h(
        "div",
        { className: "field" },
        h("label", { htmlFor: "mcp-time-limit" }, "Time limit, ms (optional)"),
        timeLimit,
        h(
          "p",
          { className: "muted hint" },
          `How long this call may wait for its answer, ${CALL_TIME.min} to ${CALL_TIME.max} ms.`,
        ),
        timeLimitError,
      ),
      h("div", { className: "toolbar" }, call, cancel),
      progress,
      formError,
    );
    toolForm = {
      tool,
      ...generated,
      correlation,
      timeLimit,
      timeLimitError,
      formError,
      outcome,
      save,
      call,
      cancel,
      progress,
      progressBar,
      progressText,
      running: null, // {session, operationId} of the call in flight
      last: null,
      resourceUri,
      appPane,
      appState,
      appCancel,
      appNote,
    };
    replace(
      toolPane,
      h("h5", {}, tool.title && tool.title !== name ? `${tool.title} (${name})` : name),
      tool.description ? h("p", { className: "muted" }, tool.description) : null,
      tool.inputSchema ? rawBlock("Input schema", tool.inputSchema) : null,
      form,
      appPane,
      outcome,
      save,
    );
    if (values && values.raw) restoreRaw(toolForm, values.raw);
    else if (values && values.arguments !== undefined) writeFields(toolForm, values.arguments);
    return toolForm;
  }

  /** What is typed in the form, as typed (even what does not read yet): kept across a new
   * epoch, when the form is made again from the new launch's listing. */
  function rawValues(form) {
    const fields = {};
    for (const field of form.fields) fields[field.name] = field.control.value;
    return { fields, correlation: form.correlation.value, timeLimit: form.timeLimit.value };
  }

  function restoreRaw(form, raw) {
    for (const field of form.fields) {
      if (raw.fields && typeof raw.fields[field.name] === "string") field.control.value = raw.fields[field.name];
    }
    form.correlation.value = raw.correlation || "";
    form.timeLimit.value = raw.timeLimit || "";
  }

  /** The arguments that read, into the address bar (`args=<json>`): a reload or a link keeps
   * them. */
  function rememberArguments() {
    const form = toolForm;
    if (!form) return;
    const values = {};
    for (const field of form.fields) {
      const read = field.read();
      if (!read.error && !read.missing) values[field.name] = read.value;
    }
    const found = form.whole ? values.arguments || {} : values;
    chosen.args = Object.keys(found).length ? JSON.stringify(found) : "";
    syncUrl();
  }

  async function submitTool(event) {
    event.preventDefault();
    const form = toolForm;
    form.formError.textContent = "";
    const read = readFields(form);
    if (read.invalid) {
      read.invalid.control.focus();
      return;
    }
    const limit = form.timeLimit.value.trim();
    let timeoutMs;
    if (limit) {
      timeoutMs = Number(limit);
      if (!Number.isInteger(timeoutMs) || timeoutMs < CALL_TIME.min || timeoutMs > CALL_TIME.max) {
        form.timeLimit.setAttribute("aria-invalid", "true");
        form.timeLimitError.textContent = `Time limit: a whole number of ms from ${CALL_TIME.min} to ${CALL_TIME.max}`;
        form.timeLimit.focus();
        return;
      }
    }
    const correlationId = form.correlation.value.trim();
    await callTool(form, read.arguments, correlationId, timeoutMs);
  }

  async function callTool(form, args, correlationId, timeoutMs) {
    const id = chosen.session;
    const mine = selection;
    form.call.disabled = true;
    form.save.hidden = true;
    let outcome = null;
    let failure = null;
    const app = form.resourceUri ? await openApp(form, id, args) : null;
    const operationId = `wb-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
    form.running = { session: id, operationId };
    form.cancel.disabled = false;
    const watching = watchProgress(form, id, operationId);
    try {
      const extra = { operationId };
      if (correlationId) extra.correlationId = correlationId;
      if (timeoutMs !== undefined) extra.timeoutMs = timeoutMs;
      outcome = await operate(id, "tools/call", { name: form.tool.name, arguments: args }, extra);
    } catch (caught) {
      failure = caught;
    }
    form.running = null;
    form.cancel.disabled = true;
    watching.stop();
    if (app) {
      // The call's end is the App's single terminal notification: its result, or a cancel
      // when there is none (a settled binding answers accepted: false and stays as it is).
      const body = outcome && outcome.result !== undefined && !outcome.error ? { result: outcome.result } : { cancelled: true };
      await app.settle(body).catch(() => {});
      form.appCancel.disabled = true;
    }
    if (unmounted || mine !== selection) return;
    form.call.disabled = false;
    showOutcome(form.outcome, outcome, failure, { correlationId });
    const succeeded = outcome && !outcome.error && !(isObject(outcome.result) && outcome.result.isError === true);
    if (succeeded) offerSave(form, args);
    loadServers(); // a call may open a session, and a server that failed has none any more
  }

  /** Mount the tool's App for a call with `args` (closing the one before); null on failure. */
  async function openApp(form, id, args) {
    if (preview) preview.close();
    preview = null;
    try {
      preview = await mountApp({
        session: id,
        toolName: form.tool.name,
        resourceUri: form.resourceUri,
        input: args,
        onState: (state) => {
          form.appState.textContent = `binding ${state}`;
          form.appPane.dataset.state = state;
          form.appCancel.disabled = state !== "pending";
        },
      });
    } catch (caught) {
      form.appState.textContent = `App: ${message(caught)}`;
      return null;
    }
    if (unmounted) {
      // The view went away while the App was mounting: nothing may keep listening.
      preview.close();
      preview = null;
      return null;
    }
    form.appPane.querySelector("iframe")?.remove();
    form.appPane.append(preview.element);
    form.appNote.textContent = `UI resource ${form.resourceUri}, showing the App of this call.`;
    return preview;
  }

  async function cancelApp() {
    if (toolForm && toolForm.running) await cancelCall(toolForm);
    if (preview) await preview.settle({ cancelled: true }).catch(() => {});
  }

  /** Cancel the form's call in flight: the server sends notifications/cancelled and the call
   * answers cancelled; a call that ended meanwhile answers as it did. */
  async function cancelCall(form) {
    if (!form || !form.running) return;
    const { session, operationId } = form.running;
    form.cancel.disabled = true;
    form.progressText.textContent = "cancelling…";
    try {
      await postJSON(
        `/api/mcp/sessions/${encodeURIComponent(session)}/operations/${encodeURIComponent(operationId)}/cancel`,
      );
    } catch (caught) {
      // BX3204: the call ended before the cancel came; its outcome shows what it answered.
      if (!(caught instanceof ApiError && caught.code === "BX3204") && form.running) {
        form.formError.textContent = `Cancel: ${message(caught)}`;
      }
    }
  }

  /** Show the progress of the form's call while it runs (read every PROGRESS_POLL ms); stop()
   * hides it. */
  function watchProgress(form, session, operationId) {
    let stopped = false;
    let timer = 0;
    const began = performance.now();
    form.progress.hidden = false;
    form.progressBar.removeAttribute("value");
    form.progressText.textContent = "running…";
    const path = `/api/mcp/sessions/${encodeURIComponent(session)}/operations/${encodeURIComponent(operationId)}`;
    async function read() {
      try {
        const { operation } = await getJSON(path);
        if (stopped) return;
        showProgress(form, operation);
      } catch (caught) {
        // Not in flight (yet, or any more): the call's own answer says the rest.
        if (!stopped && !(caught instanceof ApiError)) form.progressText.textContent = message(caught);
      }
      if (!stopped) timer = setTimeout(read, PROGRESS_POLL);
    }
    timer = setTimeout(read, PROGRESS_POLL);
    return {
      stop() {
        stopped = true;
        clearTimeout(timer);
        const took = ((performance.now() - began) / 1000).toFixed(1);
        const last = form.progressText.dataset.progress;
        form.progressText.textContent = last ? `${last} · ended after ${took} s` : "";
        form.progress.hidden = !last;
        delete form.progressText.dataset.progress;
      },
    };
  }

  function showProgress(form, operation) {
    if (operation.ended) return; // its answer is on its way
    if (operation.cancelled) {
      form.progressText.textContent = `cancelling: ${operation.cancelled.reason}`;
      return;
    }
    const said = operation.progress;
    const seconds = (operation.elapsedMs / 1000).toFixed(1);
    if (!said) {
      form.progressText.textContent = `running… ${seconds} s of at most ${operation.timeoutMs / 1000} s`;
      return;
    }
    let text = String(said.progress);
    if (typeof said.total === "number" && said.total > 0) {
      form.progressBar.max = said.total;
      form.progressBar.value = Math.min(said.progress, said.total);
      text = `${said.progress}/${said.total} (${Math.round((said.progress / said.total) * 100)}%)`;
    }
    if (said.message) text += ` ${said.message}`;
    form.progressText.dataset.progress = text;
    form.progressText.textContent = `${text} · ${seconds} s`;
  }

  function offerSave(form, args) {
    form.last = { tool: form.tool.name, arguments: args };
    const nameInput = h("input", {
      type: "text",
      autocomplete: "off",
      required: true,
      "aria-label": "Saved call name",
      value: form.tool.name,
    });
    replace(
      form.save,
      h("label", {}, "Save this call as ", nameInput),
      h("button", { type: "submit" }, "Save call"),
    );
    form.save.hidden = false;
  }

  function saveCall(event) {
    event.preventDefault();
    const form = toolForm;
    const server = serverName();
    const name = form.save.querySelector("input").value.trim();
    if (!name || !form.last || !server) return;
    const saying = (text, failed) => replace(form.save, h("p", { role: "status", className: failed ? "error" : "muted" }, text));
    collections
      .saveCall({ server, ...form.last }, name)
      .then((said) => saying(said, false))
      .catch((caught) => saying(`Not saved: ${caught.message}`, true));
  }

  function runSaved(item) {
    if (!tools.some((tool) => tool.name === item.tool)) {
      replace(toolPane, h("p", { className: "error", role: "alert" }, `The server lists no tool ${item.tool} now.`));
      return;
    }
    const form = openTool(item.tool, { arguments: item.arguments || {} });
    callTool(form, item.arguments || {}, "");
  }

  // --- Resources ---

  async function loadResources(id, mine) {
    try {
      const found = await listAll(id, "resources/list", "resources");
      if (mine !== selection || unmounted) return;
      replace(
        resourcesList,
        found.length
          ? found.map((resource) =>
              h(
                "li",
                { "data-uri": resource.uri },
                h(
                  "button",
                  {
                    type: "button",
                    "aria-label": `Read ${resource.uri}`,
                    onclick: () => readResource(id, resource.uri),
                  },
                  "Read",
                ),
                " ",
                h("code", {}, resource.uri),
                " ",
                h("span", { className: "muted" }, [resource.name, resource.mimeType].filter(Boolean).join(" · ")),
              ),
            )
          : h("li", { className: "muted" }, "The server lists no resources."),
      );
    } catch (caught) {
      if (mine === selection && !unmounted) {
        replace(resourcesList, h("li", { className: "error" }, `resources/list: ${message(caught)}`));
      }
      return;
    }
    try {
      const templates = await listAll(id, "resources/templates/list", "resourceTemplates");
      if (mine !== selection || unmounted) return;
      replace(
        templatesList,
        templates.map((template) =>
          h("li", {}, h("code", {}, template.uriTemplate), " ", h("span", { className: "muted" }, template.name || "")),
        ),
      );
    } catch (caught) {
      // Templates are optional for a server: a refusal lists none.
    }
  }

  async function readResource(id, uri) {
    const mine = selection;
    resourceBox.hidden = false;
    replace(resourceBox, h("p", { className: "muted" }, `Reading ${uri}…`));
    let outcome = null;
    let failure = null;
    try {
      outcome = await operate(id, "resources/read", { uri });
    } catch (caught) {
      failure = caught;
    }
    if (unmounted || mine !== selection) return;
    if (failure || outcome.error) {
      showOutcome(resourceBox, outcome, failure);
      return;
    }
    const contents = isObject(outcome.result) && Array.isArray(outcome.result.contents) ? outcome.result.contents : [];
    resourceBox.dataset.status = "ok";
    replace(
      resourceBox,
      h("h5", {}, uri),
      h("p", { className: "muted outcome-meta" }, `${outcome.mcpRequestId} · ${outcome.durationMs} ms`),
      contents.length
        ? contents.map((content) =>
            h(
              "div",
              { className: "mcp-resource-content" },
              h("p", { className: "muted" }, [content.uri, content.mimeType].filter(Boolean).join(" · ")),
              resourceContent(content),
            ),
          )
        : h("p", { className: "muted" }, "no contents"),
    );
  }

  // --- Prompts ---

  async function loadPrompts(id, mine) {
    try {
      const found = await listAll(id, "prompts/list", "prompts");
      if (mine !== selection || unmounted) return;
      prompts = found.filter((prompt) => isObject(prompt) && typeof prompt.name === "string");
      replace(
        promptsList,
        prompts.length
          ? prompts.map((prompt) =>
              h(
                "li",
                { "data-prompt": prompt.name },
                h(
                  "button",
                  {
                    type: "button",
                    className: "mcp-pick",
                    "aria-pressed": String(chosen.prompt === prompt.name),
                    onclick: () => openPrompt(prompt.name),
                  },
                  prompt.name,
                ),
                prompt.description ? h("span", { className: "muted" }, ` ${prompt.description}`) : null,
              ),
            )
          : h("li", { className: "muted" }, "The server lists no prompts."),
      );
      if (chosen.prompt) {
        const filling = promptForm;
        promptForm = null;
        if (prompts.some((prompt) => prompt.name === chosen.prompt)) openPrompt(chosen.prompt, filling);
        else replace(promptPane, h("p", { className: "error" }, `The server lists no prompt ${chosen.prompt}.`));
      }
    } catch (caught) {
      if (mine === selection && !unmounted) {
        replace(promptsList, h("li", { className: "error" }, `prompts/list: ${message(caught)}`));
      }
    }
  }

  function openPrompt(name, values) {
    const prompt = prompts.find((candidate) => candidate.name === name);
    if (!prompt) return;
    chosen.prompt = name;
    syncUrl();
    for (const button of promptsList.querySelectorAll("button.mcp-pick")) {
      button.setAttribute("aria-pressed", String(button.textContent === name));
    }
    const fields = (Array.isArray(prompt.arguments) ? prompt.arguments : [])
      .filter((argument) => isObject(argument) && typeof argument.name === "string")
      .map((argument, index) =>
        makeField(
          `mcp-prompt-arg-${index}`,
          argument.name,
          { type: "string", description: argument.description },
          argument.required === true,
        ),
      );
    // A link's args (Edit and replay of a prompts/get) fill the form.
    if (values && values.arguments) for (const field of fields) field.write(values.arguments[field.name]);
    const messages = h("section", { className: "mcp-outcome", "aria-label": "Prompt messages", hidden: true });
    const get = h("button", { type: "submit" }, "Get");
    const form = h(
      "form",
      {
        className: "mcp-form",
        "aria-label": `Get prompt ${name}`,
        noValidate: true,
        onsubmit: (event) => submitPrompt(event),
      },
      fields.length
        ? fields.map((field) => field.element)
        : h("p", { className: "muted" }, "This prompt takes no arguments."),
      h("div", { className: "toolbar" }, get),
    );
    replace(
      promptPane,
      h("h5", {}, name),
      prompt.description ? h("p", { className: "muted" }, prompt.description) : null,
      form,
      messages,
    );

    async function submitPrompt(event) {
      event.preventDefault();
      const read = readFields({ fields, whole: false });
      if (read.invalid) {
        read.invalid.control.focus();
        return;
      }
      const id = chosen.session;
      const mine = selection;
      get.disabled = true;
      let outcome = null;
      let failure = null;
      try {
        outcome = await operate(id, "prompts/get", { name, arguments: read.arguments });
      } catch (caught) {
        failure = caught;
      }
      if (unmounted || mine !== selection) return;
      get.disabled = false;
      if (failure || outcome.error) {
        showOutcome(messages, outcome, failure);
        return;
      }
      const result = outcome.result || {};
      const list = Array.isArray(result.messages) ? result.messages : [];
      messages.dataset.status = "ok";
      replace(
        messages,
        h("p", { className: "muted outcome-meta" }, `${outcome.mcpRequestId} · ${outcome.durationMs} ms`),
        result.description ? h("p", {}, result.description) : null,
        h(
          "ol",
          { className: "prompt-messages" },
          list.map((item) =>
            h(
              "li",
              { "data-role": item.role },
              h("strong", { className: "role" }, item.role),
              isObject(item.content)
                ? contentItem(item.content)
                : h("pre", { className: "details-json" }, pretty(item.content)),
            ),
          ),
        ),
      );
      messages.hidden = false;
    }
  }

  // --- Start ---

  const collections = mountCollections(container.firstChild, {
    selectedServer: serverName,
    callInForm: runSaved,
  });
  async function start() {
    await loadServers();
    if (unmounted) return;
    if (chosen.session) select(chosen.session, { tool: chosen.tool, prompt: chosen.prompt });
  }
  start();
  // A new epoch brings other launches: the list is read again when the artifact moves.
  let pending = 0;
  const events = follow("/api/project/events/stream", {
    sequenceOf: (frame) => frame.sequence,
    onFrame: (frame) => {
      if (!frame.type || !frame.type.startsWith("artifact.")) return;
      clearTimeout(pending);
      pending = setTimeout(() => !unmounted && loadServers(), 200);
    },
  });
  return {
    unmount() {
      unmounted = true;
      clearTimeout(pending);
      events.close();
      serverRequests.unmount();
      if (preview) preview.close();
    },
  };
}
