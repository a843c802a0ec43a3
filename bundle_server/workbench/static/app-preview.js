// An MCP App preview: the App's UI in a frame of the App frame origin (a second loopback port of
// the server, see workbench/app_frame.py), with the Workbench as the App's host.
//
// A preview is bound to one tool call (POST /api/mcp/sessions/<id>/apps: the binding starts
// pending). The frame page gets the App's HTML by postMessage and renders it sandboxed; the App
// asks `ui/initialize` and says `ui/notifications/initialized`; from then on the binding's
// notifications (GET /api/mcp/apps/<id>/notifications: tool-input, then its single terminal
// one) are handed to the App in order. `settle({result})` or `settle({cancelled: true})` ends the
// call; the binding's state is reported to `onState` as it changes (pending, settled, closed).
import { getJSON, postJSON, readEvents } from "/assets/api.js";
import { h } from "/assets/dom.js";

const HOST_INFO = { name: "bundle-devkit Workbench", version: "1" };
const PROTOCOL = "2026-01-26";

/**
 * Mount a preview of `toolName`'s App (its UI resource `resourceUri`) for a call with
 * `input`, on MCP session `session`; returns {element, settle(body), close()}.
 */
export async function mountApp({ session, toolName, resourceUri, input, onState }) {
  const listed = await getJSON("/api/mcp/servers");
  if (!listed.appFrame) throw new Error("this server shows no App previews");
  const frameOrigin = new URL(listed.appFrame).origin;
  const read = await postJSON(`/api/mcp/sessions/${encodeURIComponent(session)}/operations`, {
    method: "resources/read",
    params: { uri: resourceUri },
  });
  const contents = read.outcome.result ? read.outcome.result.contents || [] : [];
  // An App's UI is HTML (MCP Apps: text/html;profile=mcp-app); anything else is not shown.
  const html = contents.find(
    (item) => typeof item.text === "string" && String(item.mimeType || "").startsWith("text/html"),
  );
  if (!html) throw new Error(`the server has no App HTML at ${resourceUri}`);
  const { binding } = await postJSON(`/api/mcp/sessions/${encodeURIComponent(session)}/apps`, {
    toolName,
    input,
  });
  const frame = h("iframe", {
    className: "app-frame",
    title: `App of ${toolName}`,
    src: listed.appFrame,
    "data-binding": binding.bindingId,
  });
  const controller = new AbortController();
  const queue = [];
  let initialized = false;
  let closed = false;
  const report = (state) => {
    frame.dataset.state = state;
    if (onState) onState(state, binding.bindingId);
  };
  const toApp = (message) => frame.contentWindow && frame.contentWindow.postMessage(message, frameOrigin);
  const flush = () => {
    while (initialized && queue.length) toApp(queue.shift());
  };

  function onMessage(event) {
    if (event.origin !== frameOrigin || event.source !== frame.contentWindow) return;
    const message = event.data || {};
    if (message.type === "bundle/frame-ready") {
      toApp({ type: "bundle/app-html", html: html.text });
    } else if (message.jsonrpc === "2.0" && message.method === "ui/initialize" && "id" in message) {
      toApp({
        jsonrpc: "2.0",
        id: message.id,
        result: { protocolVersion: PROTOCOL, hostInfo: HOST_INFO, hostCapabilities: {}, hostContext: {} },
      });
    } else if (message.jsonrpc === "2.0" && message.method === "ui/notifications/initialized") {
      initialized = true;
      flush();
    } else if (message.jsonrpc === "2.0" && "id" in message && message.method) {
      // A request this host does not offer: answered, so the App never waits on it.
      toApp({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "Method not found" } });
    }
  }
  window.addEventListener("message", onMessage);
  report(binding.state);

  (async () => {
    try {
      const response = await fetch(`/api/mcp/apps/${encodeURIComponent(binding.bindingId)}/notifications`, {
        signal: controller.signal,
        headers: { Accept: "text/event-stream" },
      });
      await readEvents(response, (name, data) => {
        if (name === "notification") {
          queue.push(data);
          flush();
        } else if (name === "end") {
          report(data.binding.state);
        }
      });
    } catch (error) {
      if (!controller.signal.aborted) report("closed");
    }
  })();

  return {
    element: frame,
    bindingId: binding.bindingId,
    /** `{result}` or `{cancelled: true}`: the binding's answer, {accepted, binding}. */
    async settle(body) {
      const answer = await postJSON(`/api/mcp/apps/${encodeURIComponent(binding.bindingId)}/result`, body);
      report(answer.binding.state);
      return answer;
    },
    close() {
      if (closed) return;
      closed = true;
      controller.abort();
      window.removeEventListener("message", onMessage);
    },
  };
}
