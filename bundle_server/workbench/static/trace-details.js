// The Trace view's detail pane: one entry's fields, its details as pretty-printed JSON text, an
// MCP entry's whole message (params, result, error), its correlation values as filter links,
// and the other entries of the same operation.
import { h, replace, time } from "/assets/dom.js";
import { messageView } from "/assets/mcp-message.js";
import { correlationHref } from "/assets/trace-filter.js";

const MAX_CORRELATED = 50;
// Keys that name one operation (a call, a request, an invocation, a run): entries sharing one
// of them are that operation's own. The other keys name what holds many operations (an epoch,
// an MCP session, a host session, a route, a host kind): sharing one correlates nothing more
// than a filter would, so they count only for an entry that has no operation key of its own;
// an epoch or a host kind, never.
const OPERATION_KEYS = new Set(["correlationId", "executionId", "invocationId", "mcpRequestId", "requestId"]);
const NEVER_KEYS = new Set(["host", "epochId"]);

/** The correlation pairs that tie `entry` to others (see OPERATION_KEYS). */
function joinKeys(entry) {
  const pairs = Object.entries(entry.correlation || {}).filter(([key]) => !NEVER_KEYS.has(key));
  const own = pairs.filter(([key]) => OPERATION_KEYS.has(key));
  return own.length ? own : pairs;
}

/** Entries of `all` (but `entry`) sharing a join value with `entry`, newest last. */
export function correlated(entry, all) {
  const pairs = joinKeys(entry);
  if (!pairs.length) return [];
  const found = [];
  for (let i = all.length - 1; i >= 0 && found.length < MAX_CORRELATED; i--) {
    const other = all[i];
    if (other === entry || !other.correlation) continue;
    if (pairs.some(([key, value]) => other.correlation[key] === value)) found.push(other);
  }
  return found.reverse();
}

/** Fill `pane` with `entry`; `onOpen(other)` shows a correlated entry; `onClose()`;
 * `settlements` (trace-join.js) gives a request the status its response settled. */
export function showDetails(pane, entry, all, { onOpen, onClose, settlements }) {
  const status = settlements ? settlements.status(entry) : entry.status;
  const duration = settlements ? settlements.duration(entry) : entry.durationMs;
  const fields = [
    ["sequence", entry.sequence],
    ["time", entry.occurredAt],
    ["source", entry.source],
    ["kind", entry.kind],
    ["status", status],
    ["duration", duration === undefined ? undefined : `${duration} ms`],
  ].filter(([, value]) => value !== undefined);
  const correlation = Object.entries(entry.correlation || {});
  const others = correlated(entry, all);
  // Only a path of this origin becomes a link: anything else (javascript:, other hosts) is text.
  const href = typeof entry.href === "string" && sameOrigin(entry.href) ? entry.href : null;
  replace(
    pane,
    h(
      "div",
      { className: "details-head" },
      h("h3", { id: "trace-details-title" }, `#${entry.sequence} ${entry.summary}`),
      h("button", { type: "button", onclick: onClose, "aria-label": "Close details" }, "×"),
    ),
    h("dl", {}, fields.flatMap(([name, value]) => [h("dt", {}, name), h("dd", {}, String(value))])),
    href ? h("p", {}, h("a", { href }, entry.href)) : null,
    h("h4", {}, "Correlation"),
    correlation.length
      ? h(
          "ul",
          { className: "correlation" },
          correlation.map(([key, value]) =>
            h(
              "li",
              {},
              h("span", { className: "muted" }, `${key} `),
              h("a", { href: correlationHref(value, key), title: `Show entries with ${key} ${value}` }, value),
            ),
          ),
        )
      : h("p", { className: "muted" }, "none"),
    h("h4", {}, "Details"),
    entry.details === undefined
      ? h("p", { className: "muted" }, "none")
      : h("pre", { className: "details-json", tabIndex: 0 }, JSON.stringify(entry.details, null, 2)),
    entry.source === "mcp" ? messageView(entry) : null,
    h("h4", {}, `Correlated entries (${others.length}${others.length === MAX_CORRELATED ? "+" : ""})`),
    others.length
      ? h(
          "ul",
          { className: "correlated", "aria-label": "Correlated entries" },
          others.map((other) =>
            h(
              "li",
              {},
              h(
                "button",
                { type: "button", className: "link", onclick: () => onOpen(other) },
                `#${other.sequence} ${time(other.occurredAt)} ${other.kind}`,
              ),
              " ",
              h("span", { className: "muted" }, other.summary),
            ),
          ),
        )
      : h("p", { className: "muted" }, "none"),
  );
}

function sameOrigin(href) {
  // Parsed as the browser will follow it: "/\\host" or "//host" lead to another origin.
  try {
    return href.startsWith("/") && new URL(href, location.origin).origin === location.origin;
  } catch (error) {
    return false;
  }
}
