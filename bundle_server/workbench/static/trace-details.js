// The Trace view's detail pane: one entry's fields, its details as pretty-printed JSON text, its
// correlation values as filter links, and the other entries that share one of those values.
import { h, replace, time } from "/assets/dom.js";
import { correlationHref } from "/assets/trace-filter.js";

const MAX_CORRELATED = 50;
// A host kind names every entry of that host: sharing it correlates nothing.
const BROAD_KEYS = new Set(["host"]);

/** Entries of `all` (but `entry`) sharing a correlation value with `entry`, newest last. */
export function correlated(entry, all) {
  const values = new Set(
    Object.entries(entry.correlation || {})
      .filter(([key]) => !BROAD_KEYS.has(key))
      .map(([, value]) => value),
  );
  if (!values.size) return [];
  const found = [];
  for (let i = all.length - 1; i >= 0 && found.length < MAX_CORRELATED; i--) {
    const other = all[i];
    if (other === entry || !other.correlation) continue;
    for (const key in other.correlation) {
      if (!BROAD_KEYS.has(key) && values.has(other.correlation[key])) {
        found.push(other);
        break;
      }
    }
  }
  return found.reverse();
}

/** Fill `pane` with `entry`; `onOpen(other)` shows a correlated entry; `onClose()`. */
export function showDetails(pane, entry, all, { onOpen, onClose }) {
  const fields = [
    ["sequence", entry.sequence],
    ["time", entry.occurredAt],
    ["source", entry.source],
    ["kind", entry.kind],
    ["status", entry.status],
    ["duration", entry.durationMs === undefined ? undefined : `${entry.durationMs} ms`],
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
