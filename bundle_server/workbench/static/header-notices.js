// The header's notices: a button counting the open notices of the project's notice ledger and,
// under it, the list of them, each with a Dismiss button. The ledger keeps what a user must not
// miss (a failed build, a failed host sync, refused links, a hook whose handler did not run), so
// the count is always in the header, whichever view is shown.
//
// The list is re-read from /api/notices?state=open rather than folded from the notice.* events:
// the events say that something changed, the route says what is open now (after a reconnect, a
// restart or another tab's dismiss alike), and the open list is small.
import { getJSON, postJSON } from "/assets/api.js";
import { h, replace } from "/assets/dom.js";

const KINDS = {
  "build.failed": "build failed",
  "host.sync.failed": "host sync failed",
  "hook.failed": "hook failed",
  "link.refused": "links refused",
  "doctor.finding": "doctor finding",
};

function when(iso) {
  const at = new Date(iso);
  return h("time", { dateTime: iso, title: iso }, Number.isNaN(at.getTime()) ? iso : at.toLocaleString());
}

/** Mount the notices into `root` (a header element). Returns {refresh()}: the header calls it
 * on every notice.* project event and whenever the connection is live again. */
export function mountNotices(root) {
  const panelId = "notice-list";
  const toggle = h("button", {
    type: "button",
    className: "notice-count",
    "aria-expanded": "false",
    "aria-controls": panelId,
    onclick: () => setOpen(panel.hidden),
  });
  // A disclosure, not a modal: the panel follows the button in the DOM, so Tab goes from the
  // button into the list, and focus is never trapped.
  const panel = h("section", { id: panelId, className: "notice-panel", "aria-label": "Open notices", hidden: true });
  replace(root, toggle, panel);
  let notices = [];
  let failure = "";

  function setOpen(open) {
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
  }

  function render() {
    const count = notices.length;
    toggle.textContent = `Notices ${count}`;
    toggle.setAttribute("aria-label", `Notices: ${count} open`);
    root.dataset.count = String(count);
    const items = notices.map((notice) =>
      h(
        "li",
        { "data-notice": notice.id, "data-kind": notice.kind },
        h("span", { className: "notice-kind" }, KINDS[notice.kind] || notice.kind),
        " ",
        when(notice.openedAt),
        h("p", { className: "notice-message" }, notice.message),
        h("button", { type: "button", onclick: (event) => dismiss(notice, event.currentTarget) }, "Dismiss"),
      ),
    );
    replace(
      panel,
      failure ? h("p", { className: "error", role: "alert" }, failure) : null,
      count ? h("ul", {}, items) : h("p", { className: "muted" }, "No open notices."),
    );
  }

  // One read at a time; events arriving meanwhile ask for one more read after it, so a burst
  // of notice events costs two reads and the last answer shown is never an older one.
  let reading = null;
  let again = false;
  async function refresh() {
    if (reading) {
      again = true;
      return reading;
    }
    reading = (async () => {
      do {
        again = false;
        try {
          notices = (await getJSON("/api/notices?state=open")).notices;
          failure = "";
        } catch (caught) {
          // Signed out or restarting: the connection line says which; keep the last list.
        }
        render();
      } while (again);
      reading = null;
    })();
    return reading;
  }

  async function dismiss(notice, button) {
    const hadFocus = panel.contains(document.activeElement);
    button.disabled = true;
    try {
      await postJSON(`/api/notices/${encodeURIComponent(notice.id)}/dismiss`, {});
      failure = "";
    } catch (caught) {
      // Already ended (another tab, or a good build resolved it): the re-read drops it anyway.
      failure = `Could not dismiss: ${caught.message}`;
    }
    await refresh();
    // The dismissed row is gone: keep keyboard users in the list, or back on the count.
    if (hadFocus) (panel.querySelector("li button") || toggle).focus();
  }

  // Escape closes the list from wherever focus is (a dismissed row's button is gone, and focus
  // with it, until the list is read again); focus that was in the list, or nowhere, goes back
  // to the count.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || panel.hidden) return;
    const lost = root.contains(document.activeElement) || document.activeElement === document.body;
    setOpen(false);
    if (lost) toggle.focus();
  });
  // A click anywhere else closes the list, as a menu would.
  document.addEventListener("click", (event) => {
    if (!panel.hidden && !root.contains(event.target)) setOpen(false);
  });

  render();
  refresh();
  return { refresh };
}
