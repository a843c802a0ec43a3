// Raw logs: the server's log records, live (replay, then the stream), in the same virtualized
// table as the trace. A record correlated to the trace links to `/trace?correlation=<value>`,
// which the page follows in place (app.js's link handler). `/logs?correlation=<value>` shows
// only the records whose context holds that value (an MCP call's output links here). A row
// opens (click, or Enter) a pane with the whole record: a traceback is one record of many
// lines, of which a row shows the first.
import { follow } from "/assets/api.js";
import { emptyState, h, plural, replace, time } from "/assets/dom.js";
import { VirtualTable } from "/assets/virtual-table.js";

export const title = "Raw logs";

// The server retains 5,000 records (log-retention); the page keeps as many, trimmed in batches.
const KEEP = 5000;
const SLACK = 500;
const TRACE_LINK = /^\/trace\?correlation=[^&#]+$/;

const isGap = (item) => item.type === "log.gap";

function cells(item) {
  if (isGap(item)) return ["…", "", "", `${item.droppedCount} older records are no longer kept`, ""];
  // The server only sets trace links, but a link is made only from what DevLogRecord allows.
  const link =
    typeof item.href === "string" && TRACE_LINK.test(item.href)
      ? h("a", { href: item.href, title: "Show the correlated trace entries" }, "trace")
      : "";
  return [item.sequence, time(item.occurredAt), item.level, item.message, link];
}

export function mount(container, params) {
  const correlation = ((params && params.get("correlation")) || "").trim();
  const passes = (record) => !correlation || Object.values(record.context || {}).includes(correlation);
  const records = [];
  const incoming = [];
  let lastSequence = 0;
  let frame = 0;
  const table = new VirtualTable({
    label: "Log records",
    className: "logs-table",
    columns: ["#", "time", "level", "message", "trace"],
    cells,
    rowClass: (item) => (isGap(item) ? "gap" : item.level === "error" ? "error" : item.level === "warn" ? "warn" : ""),
    selectable: (item) => !isGap(item),
    onOpen: (item) => open(item),
  });
  const pane = h("aside", { className: "trace-details log-details", "aria-labelledby": "log-details-title", hidden: true });
  const counts = h("span", { className: "muted counts" });
  const empty = emptyState("No log records yet: the server's records appear here as it writes them.");
  replace(
    container,
    h(
      "div",
      { className: "logs-view" },
      h(
        "div",
        { className: "toolbar" },
        h("h2", {}, "Raw logs"),
        counts,
        correlation
          ? h("span", { className: "logs-filter" }, ` · correlated with ${correlation} · `, h("a", { href: "/logs" }, "all records"))
          : null,
      ),
      empty,
      h("div", { className: "trace-split" }, table.element, pane),
    ),
  );

  /** The whole of `record` in the pane: its message as written, and its context. */
  function open(record) {
    const context = Object.entries(record.context || {});
    replace(
      pane,
      h(
        "div",
        { className: "details-head" },
        h("h3", { id: "log-details-title" }, `Record ${record.sequence} · ${record.level}`),
        h("button", { type: "button", className: "btn", onclick: () => close() }, "Close"),
      ),
      h("p", { className: "muted" }, time(record.occurredAt)),
      h("pre", { className: "log-message" }, record.message),
      context.length
        ? h("dl", {}, context.flatMap(([key, value]) => [h("dt", {}, key), h("dd", {}, String(value))]))
        : null,
    );
    pane.hidden = false;
  }

  function close() {
    pane.hidden = true;
    table.element.focus();
  }

  function flush() {
    frame = 0;
    const atEnd = table.atEnd;
    records.push(...incoming);
    incoming.length = 0;
    if (records.length > KEEP + SLACK) {
      const dropped = records.length - KEEP;
      records.splice(0, dropped);
      table.droppedFront(dropped);
    }
    table.update(records, { follow: atEnd });
    counts.textContent = plural(records.length, "record");
    empty.hidden = records.length > 0;
  }

  const stream = follow("/api/logs/stream", {
    sequenceOf: (f) =>
      f.type === "log.record" ? f.record.sequence : isGap(f) ? f.firstAvailableSequence - 1 : undefined,
    onFrame(f) {
      if (f.type === "log.record") {
        if (f.record.sequence <= lastSequence) return; // a resumed stream may repeat the edge
        lastSequence = f.record.sequence;
        if (!passes(f.record)) return;
        incoming.push(f.record);
      } else if (isGap(f)) {
        incoming.push(f);
      } else {
        return;
      }
      if (!frame) frame = requestAnimationFrame(flush);
    },
  });
  table.update(records);
  counts.textContent = plural(0, "record");
  return {
    unmount() {
      stream.close();
      if (frame) cancelAnimationFrame(frame);
      table.destroy();
    },
  };
}
