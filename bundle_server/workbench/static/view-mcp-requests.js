// The MCP view's pending server requests: an MCP server asking our client, in the middle of a
// call, for the user's input (elicitation/create: a form generated from its requestedSchema) or
// a model's answer (sampling/createMessage: answered by the user's text). Each is answered
// through POST /api/mcp/sessions/{id}/requests/{requestId}; one left unanswered is declined by
// the server after mcp-server-request-time (the panel says so and lets it go).
// What is pending is listed once (GET .../requests, which says the trace's sequence then), and
// the trace is followed from that sequence: `mcp.server-request` entries say a request came,
// was answered or expired, on any session of the page's server.
import { follow, getJSON, postJSON } from "/assets/api.js";
import { h, replace } from "/assets/dom.js";

const KINDS = new Set(["string", "number", "integer", "boolean"]);
// A string's `format` as the input type that checks it.
const FORMATS = { email: "email", uri: "url", date: "date" };

/** The choices of an enum property: `enum` (with the older `enumNames`), or titled `oneOf` /
 * `anyOf` constants; null when the property is free. */
function choices(schema) {
  if (Array.isArray(schema.enum)) {
    const names = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    return schema.enum.map((value, i) => ({ value, title: names[i] || String(value) }));
  }
  const titled = schema.oneOf || schema.anyOf;
  if (Array.isArray(titled) && titled.every((option) => option && "const" in option)) {
    return titled.map((option) => ({ value: option.const, title: option.title || String(option.const) }));
  }
  return null;
}

/** A field of an elicitation form for one property of its (flat) requestedSchema. */
function field(requestId, name, schema, required) {
  const id = `elicit-${requestId}-${name}`;
  const kind = KINDS.has(schema.type) ? schema.type : "string";
  let control;
  const options = choices(schema);
  if (options) {
    control = h(
      "select",
      { id },
      required ? null : h("option", { value: "" }, "—"),
      options.map((option) => h("option", { value: String(option.value) }, option.title)),
    );
    if (schema.default !== undefined) control.value = String(schema.default);
  } else if (kind === "boolean") {
    control = h("input", { id, type: "checkbox" });
    control.checked = schema.default === true;
  } else {
    const type = kind === "string" ? FORMATS[schema.format] || "text" : "number";
    control = h("input", { id, type, autocomplete: "off" });
    if (kind === "integer") control.step = "1";
    // The schema's bounds, checked by the browser before anything is sent.
    if (typeof schema.minimum === "number") control.min = String(schema.minimum);
    if (typeof schema.maximum === "number") control.max = String(schema.maximum);
    if (typeof schema.minLength === "number") control.minLength = schema.minLength;
    if (typeof schema.maxLength === "number") control.maxLength = schema.maxLength;
    if (schema.default !== undefined) control.value = String(schema.default);
  }
  control.name = name;
  // A required checkbox would have to be ticked: false is an answer too.
  if (required && kind !== "boolean") control.required = true;
  const label = schema.title || name;
  const element = h(
    "div",
    { className: "field", "data-field": name },
    h("label", { htmlFor: id }, label, required ? h("span", { className: "badge required" }, "required") : null),
    control,
    schema.description ? h("p", { className: "muted hint" }, schema.description) : null,
  );
  function read() {
    if (kind === "boolean") return control.checked;
    const text = control.value;
    if (text === "") return undefined;
    if (kind === "number" || kind === "integer") return Number(text);
    return text;
  }
  return { name, element, read };
}

/** Mount the panel; `element` goes where the MCP view puts it; `unmount()` ends it. */
export function mountServerRequests(sessionOf) {
  const shown = new Map(); // serverRequestId -> its card
  const list = h("div", { className: "server-request-list" });
  const element = h(
    "section",
    { className: "server-requests panel", "aria-label": "Server requests", hidden: true },
    h("h3", {}, "The server asks"),
    list,
  );
  let stream = null;
  let closed = false;

  function sync() {
    element.hidden = shown.size === 0;
  }

  function show(request) {
    if (shown.has(request.serverRequestId) || request.state !== "pending") return;
    const card = request.method === "elicitation/create" ? elicitation(request) : sampling(request);
    shown.set(request.serverRequestId, card);
    list.append(card);
    sync();
  }

  function gone(requestId, why) {
    const card = shown.get(requestId);
    if (!card) return;
    shown.delete(requestId);
    card.remove();
    sync();
    if (why) say(why);
  }

  function say(why) {
    const note = h("p", { className: "muted server-request-gone", role: "status" }, why);
    list.append(note);
    setTimeout(() => note.remove(), 8000);
  }

  async function answer(request, body, status) {
    status.textContent = "Sending…";
    try {
      const path = `/api/mcp/sessions/${encodeURIComponent(request.mcpSessionId)}/requests/${encodeURIComponent(request.serverRequestId)}`;
      await postJSON(path, body);
      gone(request.serverRequestId, `Answered ${request.method}: ${body.action}.`);
    } catch (caught) {
      status.textContent = caught.message;
    }
  }

  function card(request, title, content, form) {
    return h(
      "article",
      {
        className: "server-request",
        "data-request-id": request.serverRequestId,
        "data-method": request.method,
        "aria-label": title,
      },
      h("h4", {}, title, " ", h("span", { className: "badge badge-info" }, request.method)),
      content,
      form,
      h("p", { className: "muted" }, `Declined for you at ${request.expiresAt.slice(11, 19)} UTC if not answered.`),
    );
  }

  function buttons(request, status, accept) {
    const decline = h("button", { type: "button", className: "btn" }, "Decline");
    decline.addEventListener("click", () => answer(request, { action: "decline" }, status));
    const cancel = h("button", { type: "button", className: "btn" }, "Cancel");
    cancel.addEventListener("click", () => answer(request, { action: "cancel" }, status));
    return h(
      "div",
      { className: "toolbar" },
      h("button", { type: "submit", className: "btn btn-primary" }, accept),
      decline,
      cancel,
      status,
    );
  }

  function elicitation(request) {
    const params = request.params || {};
    const schema = params.requestedSchema || {};
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const fields = Object.entries(schema.properties || {}).map(([name, property]) =>
      field(request.serverRequestId, name, property || {}, required.has(name)),
    );
    const status = h("span", { className: "error", role: "alert" });
    const form = h(
      "form",
      { className: "mcp-form elicitation-form", "aria-label": `Answer: ${params.message || "the server's question"}` },
      fields.map((f) => f.element),
      buttons(request, status, "Accept"),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!form.reportValidity()) return;
      const content = {};
      for (const f of fields) {
        const value = f.read();
        if (value !== undefined) content[f.name] = value;
      }
      answer(request, { action: "accept", content }, status);
    });
    return card(request, "Elicitation", h("p", { className: "server-request-message" }, params.message || ""), form);
  }

  function sampling(request) {
    const params = request.params || {};
    const said = (params.messages || []).map((message) =>
      h(
        "li",
        {},
        h("span", { className: "muted" }, `${message.role}: `),
        message.content && message.content.type === "text" ? message.content.text : JSON.stringify(message.content),
      ),
    );
    const text = h("textarea", { rows: 3, name: "text", required: true, "aria-label": "The answer's text" });
    const status = h("span", { className: "error", role: "alert" });
    const form = h("form", { className: "mcp-form sampling-form", "aria-label": "Answer the sampling request" }, text, buttons(request, status, "Send"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!form.reportValidity()) return;
      answer(request, { action: "accept", text: text.value }, status);
    });
    return card(
      request,
      "Sampling",
      h(
        "div",
        {},
        params.systemPrompt ? h("p", { className: "muted" }, `System: ${params.systemPrompt}`) : null,
        h("ul", { className: "sampling-messages" }, said),
        h("p", { className: "muted" }, `Answer as the model (at most ${params.maxTokens} tokens asked):`),
      ),
      form,
    );
  }

  async function refresh(session) {
    const reply = await getJSON(`/api/mcp/sessions/${encodeURIComponent(session)}/requests`);
    for (const request of reply.requests) show(request);
    return reply.traceSequence;
  }

  function receive(frame) {
    if (frame.type !== "trace.entry") return;
    const entry = frame.entry;
    if (entry.source !== "mcp" || entry.kind !== "mcp.server-request") return;
    const details = entry.details || {};
    if (details.state === "pending") {
      refresh(entry.correlation.mcpSessionId).catch(() => {});
    } else if (details.state === "expired") {
      gone(details.serverRequestId, `${details.method} was declined: no answer in time.`);
    } else if (details.state === "declined") {
      // Never listed: one past mcp-pending-server-requests is declined as it comes.
      say(`${details.method} was declined: ${details.limit} requests of this server already wait.`);
    } else {
      gone(details.serverRequestId, null);
    }
  }

  /** The launch to list first: the view's session when it is one of the active epoch, else
   * the first launch (any list says where the trace is; a request of any session shows). */
  async function firstSession() {
    const listed = await getJSON("/api/mcp/servers");
    const launches = listed.servers.flatMap((server) => server.launches.map((launch) => launch.launchId));
    const chosen = sessionOf();
    return launches.includes(chosen) ? chosen : launches[0] || "";
  }

  (async () => {
    let after;
    try {
      const session = await firstSession();
      if (!session || closed) return; // no MCP server: no one to ask anything
      after = await refresh(session);
    } catch (caught) {
      return; // not a launch of the active epoch: the view says so itself
    }
    if (closed) return;
    stream = follow("/api/trace/stream", {
      after,
      sequenceOf: (f) => (f.type === "trace.entry" ? f.entry.sequence : undefined),
      onFrame: receive,
    });
  })();

  return {
    element,
    unmount() {
      closed = true;
      if (stream) stream.close();
    },
  };
}
