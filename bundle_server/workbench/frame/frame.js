// The App frame: runs on an origin of its own, apart from the Workbench (spec/runtime.toml
// `frame`). It takes an App's HTML from the Workbench (its parent, on the origin the page
// names), renders it in a sandboxed srcdoc frame (scripts, but an opaque origin: no storage,
// no cookies, and this origin's policy allows no network), and relays JSON-RPC messages: the
// Workbench's to the App, the App's to the Workbench. Nothing else reaches either side.
"use strict";

const workbench = document.querySelector('meta[name="workbench-origin"]').content;
let app = null;

function toWorkbench(message) {
  window.parent.postMessage(message, workbench);
}

function mount(html) {
  app = document.createElement("iframe");
  app.setAttribute("sandbox", "allow-scripts");
  app.setAttribute("title", "MCP App");
  app.addEventListener("load", () => toWorkbench({ type: "bundle/app-loaded" }));
  app.srcdoc = html;
  document.body.replaceChildren(app);
}

window.addEventListener("message", (event) => {
  if (event.source === window.parent && event.origin === workbench) {
    const message = event.data;
    if (message && message.type === "bundle/app-html" && typeof message.html === "string") {
      mount(message.html);
    } else if (app && app.contentWindow) {
      // The App's frame has an opaque origin: "*" is the only target that reaches it, and
      // only this frame's own child is addressed.
      app.contentWindow.postMessage(message, "*");
    }
  } else if (app && event.source === app.contentWindow) {
    toWorkbench(event.data);
  }
});

toWorkbench({ type: "bundle/frame-ready" });
