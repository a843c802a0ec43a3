// The App frame: runs on an origin of its own, apart from the Workbench (spec/runtime.toml
// `frame`). It takes an App's HTML from the Workbench (its parent, on one of the origins the
// page names), renders it in a sandboxed srcdoc frame (scripts, but an opaque origin: no
// storage, no cookies, and this origin's policy allows no fetch), and relays JSON-RPC
// messages: the Workbench's to the App, the App's to the Workbench. Nothing else reaches
// either side; an App that navigates its frame away is removed, so nothing is relayed to a
// page it was not.
"use strict";

const allowed = document.querySelector('meta[name="workbench-origins"]').content.split(" ");
// The Workbench origin that framed this page: named by the browser where it can
// (location.ancestorOrigins, Chromium and WebKit), else learnt when the Workbench first speaks.
let workbench = framedBy();
let app = null;

function framedBy() {
  const ancestors = window.location.ancestorOrigins;
  const parent = ancestors && ancestors.length ? ancestors[0] : null;
  return allowed.includes(parent) ? parent : null;
}

function toWorkbench(message) {
  if (workbench) window.parent.postMessage(message, workbench);
  // A browser that does not name the parent, before it spoke: to each allowed origin (only
  // the parent's one delivers; the others are refused with a console line).
  else for (const origin of allowed) window.parent.postMessage(message, origin);
}

function mount(html) {
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("title", "MCP App");
  let loads = 0;
  frame.addEventListener("load", () => {
    loads += 1;
    if (loads === 1) {
      toWorkbench({ type: "bundle/app-loaded" });
    } else if (app === frame) {
      // A second document in the frame: the App navigated away. It is shown no more.
      app = null;
      frame.remove();
      toWorkbench({ type: "bundle/app-navigated" });
    }
  });
  frame.srcdoc = html;
  app = frame;
  document.body.replaceChildren(frame);
}

window.addEventListener("message", (event) => {
  if (event.source === window.parent && allowed.includes(event.origin)) {
    workbench = event.origin;
    const message = event.data;
    if (message && message.type === "bundle/app-html" && typeof message.html === "string") {
      mount(message.html);
    } else if (app && app.contentWindow) {
      // The App's frame has an opaque origin: "*" is the only target that reaches it, and
      // only this frame's own child (still the App's first document) is addressed.
      app.contentWindow.postMessage(message, "*");
    }
  } else if (app && event.source === app.contentWindow) {
    toWorkbench(event.data);
  }
});

toWorkbench({ type: "bundle/frame-ready" });
