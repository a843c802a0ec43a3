// The Workbench: one page, a view per path. Links between views move with the History API, so
// every view keeps a stable URL (reload, bookmarks, `/trace?correlation=` links from logs).
import { connection, follow, getJSON } from "/assets/api.js";
import { h, replace } from "/assets/dom.js";
import { mountNotices } from "/assets/header-notices.js";
import * as logs from "/assets/view-logs.js";
import * as mcp from "/assets/view-mcp.js";
import * as project from "/assets/view-project.js";
import * as protocol from "/assets/view-protocol.js";
import * as routes from "/assets/view-routes.js";
import * as runtime from "/assets/view-runtime.js";
import * as sessions from "/assets/view-sessions.js";
import * as trace from "/assets/view-trace.js";

const VIEWS = {
  "/": sessions,
  "/sessions": sessions,
  "/trace": trace,
  "/logs": logs,
  "/project": project,
  "/routes": routes,
  "/runtime": runtime,
  "/mcp": mcp,
  "/advanced/protocol": protocol,
};
const main = document.getElementById("view");
let current = null;

function show() {
  const view = VIEWS[location.pathname] || sessions;
  if (current) current.unmount();
  replace(main);
  for (const link of document.querySelectorAll("header nav a")) {
    const here = VIEWS[link.getAttribute("href")] === view;
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  current = view.mount(main, new URLSearchParams(location.search));
  document.title = `${view.title} · bundle-devkit Workbench`;
}

// Same-origin links to a view are followed in place (modifier keys keep the browser's way).
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("a[href]");
  if (!link || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(link.href, location.href);
  if (url.origin !== location.origin || !(url.pathname in VIEWS)) return;
  event.preventDefault();
  if (url.pathname + url.search !== location.pathname + location.search) {
    history.pushState(null, "", url.pathname + url.search);
  }
  show();
  main.focus();
});
window.addEventListener("popstate", show);

// The header: the connection's state, and the build's and the open notices', live from the
// project event stream.
const connectionLine = document.getElementById("connection");
const LABELS = {
  connecting: "connecting…",
  live: "connected",
  reconnecting: "reconnecting…",
  "signed-out": "signed out: open the URL bundle-server printed",
};
function showConnection(state) {
  connectionLine.textContent = LABELS[state] || state;
  connectionLine.dataset.state = state;
}
connection.listeners.add(showConnection);
showConnection(connection.state);

const buildBadge = document.getElementById("build");
function showBuild(status) {
  if (!status) return;
  const build = status.build || {};
  const artifact = status.artifact || {};
  const epoch = artifact.activeEpoch ? ` · ${artifact.activeEpoch.id}` : "";
  replace(buildBadge, h("a", { href: "/project" }, `build ${build.state || "?"}${epoch}`));
  buildBadge.dataset.state = build.state || "";
}
async function refreshBuild() {
  try {
    showBuild(await getJSON("/api/project/status"));
  } catch (error) {
    // Signed out or restarting: the connection line says which.
  }
}
const notices = mountNotices(document.getElementById("notices"));
// Back live after a drop or a server restart: what opened or closed meanwhile may be past what
// the stream still replays (a bounded history, or another server's), so read the list again.
connection.listeners.add((state) => {
  if (state === "live") notices.refresh();
});
refreshBuild();
follow("/api/project/events/stream", {
  sequenceOf: (frame) => frame.sequence,
  onFrame: (frame) => {
    refreshBuild();
    if (frame.type && frame.type.startsWith("notice.")) notices.refresh();
  },
});

show();
