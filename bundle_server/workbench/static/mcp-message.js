// One JSON-RPC message of an MCP session, whole: its trace entry names it (`details.messageId`)
// and the server keeps its body (GET /api/mcp/messages/{id}, McpMessage). Shown as its parts:
// params, result (an `isError` result marked as the error it is), error object; a message kept
// cut says so. Used by the protocol view and the trace details.
import { getJSON } from "/assets/api.js";
import { h, replace } from "/assets/dom.js";

const CACHED = 200; // bodies this page keeps once read (a message never changes)
const cache = new Map();

/** The McpMessage named `messageId` (a promise; read once). */
export function loadMessage(messageId) {
  let found = cache.get(messageId);
  if (!found) {
    found = getJSON(`/api/mcp/messages/${encodeURIComponent(messageId)}`).then((reply) => reply.message);
    found.catch(() => cache.delete(messageId)); // a failed read may be tried again
    cache.set(messageId, found);
    if (cache.size > CACHED) cache.delete(cache.keys().next().value);
  }
  return found;
}

/** Whether a trace entry's message is an error: a JSON-RPC error, or a result with isError. */
export function isErrorEntry(entry) {
  const details = entry.details || {};
  return entry.status === "error" || details.isError === true || details.error !== undefined;
}

function json(value, label) {
  return h("pre", { className: "details-json message-json", tabIndex: 0, "aria-label": label }, JSON.stringify(value, null, 2));
}

/** The parts of `record` (McpMessage) as elements. */
export function messageParts(record) {
  const message = record.message || {};
  const parts = [];
  if (record.truncated) {
    parts.push(
      h(
        "p",
        { className: "message-cut badge badge-warn", role: "note" },
        `Cut to fit mcp-message-bytes: the whole message was ${record.bytes} bytes (cut strings end with …)`,
      ),
    );
  }
  if (message.params !== undefined) parts.push(h("h5", {}, "Params"), json(message.params, "Params JSON"));
  if (message.result !== undefined) {
    const failed = message.result && message.result.isError === true;
    parts.push(
      h(
        "h5",
        {},
        "Result ",
        failed ? h("span", { className: "badge badge-error message-is-error" }, "isError: true") : null,
      ),
      json(message.result, "Result JSON"),
    );
  }
  if (message.error !== undefined) {
    parts.push(
      h("h5", {}, "Error ", h("span", { className: "badge badge-error" }, `code ${message.error.code}`)),
      json(message.error, "Error JSON"),
    );
  }
  if (!parts.length || (parts.length === 1 && record.truncated)) parts.push(json(message, "Message JSON"));
  return parts;
}

/** An element that shows the message of a trace entry once read (or why it cannot be). */
export function messageView(entry) {
  const details = entry.details || {};
  const view = h("div", { className: "mcp-message", "data-message-id": details.messageId || "" });
  if (!details.messageId) return null;
  view.append(h("p", { className: "muted loading" }, "Loading the message…"));
  loadMessage(details.messageId).then(
    (record) => {
      view.dataset.loaded = "true";
      replace(view, h("h4", {}, `Message (${record.bytes} bytes)`), messageParts(record));
    },
    (error) => {
      view.dataset.loaded = "false";
      replace(
        view,
        h(
          "p",
          { className: "muted error-state" },
          error.status === 404
            ? "The message's body is no longer kept (the oldest go past the server's retention budget)."
            : `Could not read the message: ${error.message}`,
        ),
      );
    },
  );
  return view;
}
