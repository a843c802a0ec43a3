// The Trace view's filter: what the URL query says (`source`, `kind`, `status`, `correlation`,
// `key`), so a filtered view can be linked, and whether an entry passes it.

export const SOURCES = ["invocation", "kernel", "mcp", "hook", "session", "log", "diagnostic"];
export const STATUSES = ["ok", "error", "running"];
// TraceCorrelation.json's keys: `key` narrows `correlation` to one of them.
export const CORRELATION_KEYS = [
  "correlationId",
  "conversationId",
  "epochId",
  "executionId",
  "host",
  "invocationId",
  "mcpRequestId",
  "mcpSessionId",
  "requestId",
  "routeId",
  "sessionId",
];
const NAMES = ["source", "kind", "status", "correlation", "key"];

export function parseFilter(params) {
  const filter = {};
  for (const name of NAMES) filter[name] = (params.get(name) || "").trim();
  return filter;
}

/** The query string for `filter` ("" when it lets everything through). */
export function filterQuery(filter) {
  const params = new URLSearchParams();
  for (const name of NAMES) {
    // A key without a value filters nothing, so it stays out of the link.
    if (filter[name] && (name !== "key" || filter.correlation)) params.set(name, filter[name]);
  }
  const query = params.toString();
  return query ? `?${query}` : "";
}

export function isEmpty(filter) {
  return !filterQuery(filter);
}

/** Whether `item` passes; gap markers always do: they show where history is missing.
 * `status` is the item's as shown (a request settled by its response: trace-join.js). */
export function matches(filter, item, status = item.status) {
  if (item.type === "trace.gap") return true;
  if (filter.source && item.source !== filter.source) return false;
  if (filter.kind && item.kind !== filter.kind) return false;
  if (filter.status && status !== filter.status) return false;
  if (filter.correlation) {
    const correlation = item.correlation || {};
    if (filter.key) return correlation[filter.key] === filter.correlation;
    for (const key in correlation) if (correlation[key] === filter.correlation) return true;
    return false;
  }
  return true;
}

/** The link that filters the trace to one correlation value (under `key`, when given). */
export function correlationHref(value, key) {
  return `/trace${filterQuery({ correlation: value, key: key || "" })}`;
}
