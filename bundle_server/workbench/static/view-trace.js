// Trace: the unified trace, live. The retained history is replayed once (GET /api/trace), then
// the stream follows from its last sequence. Entries stay in an array; the table renders only
// the rows in view; frames are applied once per animation frame, so a burst costs one render.
import { followTrace } from "/assets/api.js";
import { h, replace, time } from "/assets/dom.js";
import { showDetails } from "/assets/trace-details.js";
import {
  CORRELATION_KEYS,
  SOURCES,
  STATUSES,
  filterQuery,
  isEmpty,
  matches,
  parseFilter,
} from "/assets/trace-filter.js";
import { Settlements } from "/assets/trace-join.js";
import { VirtualTable } from "/assets/virtual-table.js";

export const title = "Trace";

// The server retains 10,000 entries (trace-retention); the page keeps as many, dropping the
// oldest in batches so a busy stream does not shift the array on every entry.
const KEEP = 10000;
const SLACK = 1000;

const isGap = (item) => item.type === "trace.gap";

// Requests settle when their response arrives (trace-join.js says why the view joins them).
const settlements = new Settlements();

function cells(item) {
  if (isGap(item)) {
    return ["…", "", "", "gap", "", `${item.droppedCount} older entries are no longer kept`, ""];
  }
  const duration = settlements.duration(item);
  return [
    item.sequence,
    time(item.occurredAt),
    item.source,
    item.kind,
    settlements.status(item) || "",
    item.summary,
    duration === undefined ? "" : duration,
  ];
}

function choice(label, name, values, anyText) {
  return h(
    "label",
    {},
    `${label} `,
    h(
      "select",
      { name, "aria-label": label },
      h("option", { value: "" }, anyText),
      values.map((value) => h("option", { value }, value)),
    ),
  );
}

export function mount(container, params) {
  let filter = parseFilter(params);
  const all = []; // entries and gap markers in stream order
  let admitted = 0; // how many of `all` the view shows: fewer than all.length while paused
  let shown = []; // the admitted items that pass the filter
  let paused = false;
  let opened = null;
  let order = 0;
  let lastSequence = 0;
  const incoming = [];
  let frame = 0;
  let stream = null;
  let closed = false;
  const kinds = new Set();

  const table = new VirtualTable({
    label: "Trace entries",
    className: "trace-table",
    columns: ["#", "time", "source", "kind", "status", "summary", "ms"],
    // Every column but the summary as wide as its values: none is cut ("8023…").
    widths: ["fit", "fit", "fit", "fit", "fit", "minmax(10em, 1fr)", "fit"],
    cells,
    rowClass: (item) => (isGap(item) ? "gap" : settlements.status(item) === "error" ? "error" : ""),
    selectable: (item) => !isGap(item),
    onOpen: (item) => open(item),
  });
  const pane = h("aside", {
    className: "trace-details",
    "aria-labelledby": "trace-details-title",
    hidden: true,
  });
  const kindList = h("datalist", { id: "trace-kinds" });
  const kindInput = h("input", { name: "kind", type: "search", size: 16, "aria-label": "Kind" });
  kindInput.setAttribute("list", kindList.id); // `list` is a read-only property: the attribute
  const form = h(
    "form",
    { className: "toolbar", role: "search", "aria-label": "Trace filter", onsubmit: (e) => e.preventDefault() },
    choice("Source", "source", SOURCES, "any"),
    h("label", {}, "Kind ", kindInput),
    kindList,
    choice("Status", "status", STATUSES, "any"),
    choice("Correlation key", "key", CORRELATION_KEYS, "any key"),
    h("input", {
      name: "correlation",
      type: "search",
      size: 24,
      placeholder: "value",
      "aria-label": "Correlation value",
    }),
    h("button", { type: "button", onclick: () => setFilter({}) }, "Clear filters"),
  );
  const pause = h("button", { type: "button", className: "pause", onclick: () => setPaused(!paused) }, "Pause");
  const counts = h("span", { className: "muted counts" });
  const error = h("p", { className: "error", role: "alert" });
  const view = h(
    "div",
    { className: "trace-view" },
    h("div", { className: "toolbar" }, h("h2", {}, "Trace"), pause, counts),
    form,
    error,
    h("div", { className: "trace-split" }, table.element, pane),
  );
  replace(container, view);

  function syncControls() {
    for (const [name, value] of Object.entries(filter)) form.elements[name].value = value;
  }
  form.addEventListener("input", () => {
    const next = {};
    for (const name of Object.keys(filter)) next[name] = form.elements[name].value.trim();
    setFilter(next, { controls: false });
  });

  /** Apply `next`, reflect it in the URL (replacing: typing is not navigation). */
  function setFilter(next, { controls = true, push = false } = {}) {
    filter = parseFilter(new URLSearchParams(filterQuery(next)));
    if (controls) syncControls();
    const url = `/trace${filterQuery(filter)}`;
    if (url !== location.pathname + location.search) {
      if (push) history.pushState(null, "", url);
      else history.replaceState(null, "", url);
    }
    refilter(true);
    view.dataset.filtered = String(!isEmpty(filter));
    showCounts();
  }

  /** Derive the shown items from the filter again, keeping the selection. */
  function refilter(follow) {
    const keep = table.selectedItem;
    shown = [];
    for (let i = 0; i < admitted; i++) if (matches(filter, all[i], settlements.status(all[i]))) shown.push(all[i]);
    table.selected = -1;
    table.update(shown, { follow });
    if (keep) table.selectItem(keep);
  }

  function setPaused(value) {
    paused = value;
    pause.textContent = paused ? "Resume" : "Pause";
    view.dataset.paused = String(paused);
    if (!paused) admit(table.atEnd);
    showCounts();
  }

  function showCounts() {
    const waiting = all.length - admitted;
    counts.textContent =
      `${shown.length} shown of ${admitted} entries` + (paused ? ` · paused, ${waiting} new` : "");
  }

  function open(item) {
    opened = item;
    pane.hidden = false;
    table.selectItem(item);
    showDetails(pane, item, all, { onOpen: open, onClose: close, settlements });
  }

  function close() {
    opened = null;
    pane.hidden = true;
    replace(pane);
    table.element.focus();
  }

  function receive(frame_) {
    if (frame_.type === "trace.entry") {
      const entry = frame_.entry;
      if (entry.sequence <= lastSequence) return; // a resumed stream may repeat the edge
      lastSequence = entry.sequence;
      entry.order = ++order;
      incoming.push(entry);
    } else if (isGap(frame_)) {
      frame_.order = ++order;
      incoming.push(frame_);
    } else {
      return;
    }
    if (!frame) frame = requestAnimationFrame(flush);
  }

  function flush() {
    frame = 0;
    if (closed || !incoming.length) return;
    let settled = false;
    for (const item of incoming) {
      all.push(item);
      if (item.kind && settlements.note(item)) settled = true;
      if (item.kind && !kinds.has(item.kind)) {
        kinds.add(item.kind);
        kindList.append(h("option", { value: item.kind }));
      }
    }
    incoming.length = 0;
    // Whether the view follows the tail is decided before trim() moves the scroll position.
    const atEnd = table.atEnd;
    trim();
    if (!paused) admit(atEnd);
    // A response changes its request's row (status, ms): the rows in view are filled again
    // (the fitted widths already saw those values: the response's own row has them), and a
    // status filter is applied again (the request may pass it now, or no longer).
    if (settled && filter.status) refilter(atEnd);
    else if (settled) table.repaint();
    showCounts();
  }

  function admit(atEnd) {
    for (let i = admitted; i < all.length; i++) if (matches(filter, all[i], settlements.status(all[i]))) shown.push(all[i]);
    admitted = all.length;
    table.update(shown, { follow: atEnd });
  }

  function trim() {
    if (all.length <= KEEP + SLACK) return;
    const gone = all.splice(0, all.length - KEEP);
    admitted = Math.max(0, admitted - gone.length);
    const last = gone[gone.length - 1].order;
    let count = 0;
    while (count < shown.length && shown[count].order <= last) count++;
    shown.splice(0, count);
    table.droppedFront(count);
  }

  // Links to a filtered trace (the detail pane's correlation values) stay in this view: the
  // entries are already here, so only the filter changes.
  container.addEventListener("click", onLink);
  function onLink(event) {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!link || event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const url = new URL(link.href, location.href);
    if (url.origin !== location.origin || url.pathname !== "/trace") return;
    event.preventDefault();
    setFilter(parseFilter(url.searchParams), { push: true });
    table.element.focus();
  }
  view.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && opened) close();
  });

  function start() {
    stream = followTrace({
      receive,
      replayed() {
        if (frame) cancelAnimationFrame(frame);
        flush();
        view.dataset.ready = "true";
      },
      failed(caught) {
        error.textContent = `Could not load the trace: ${caught.message}`;
      },
    });
  }

  syncControls();
  setFilter(filter, { controls: false });
  setPaused(false);
  start();
  return {
    unmount() {
      closed = true;
      if (stream) stream.close();
      if (frame) cancelAnimationFrame(frame);
      container.removeEventListener("click", onLink);
      table.destroy();
    },
  };
}
