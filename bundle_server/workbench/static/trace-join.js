// A request's row settles when its response arrives. The unified trace is append-only: an
// entry, once numbered, never changes (replay and resumed streams hand out the same entries by
// sequence), so a request's entry keeps `status: running` for good. The views join instead:
// the response (mcp.response or mcp.error, the same `mcpRequestId`) gives its request's row
// the final status and duration. A server's request to our client (direction `in`) is joined to
// our answer (direction `out`) by the session and the JSON-RPC id, the server's own numbering.

const KEPT = 20000; // responses remembered (more than the trace retains entries)

/** Whether `entry` is a server's message to our client, or our answer to one (no mcpRequestId). */
const isServers = (entry) => {
  const details = entry.details || {};
  const ours = entry.kind === "mcp.request" ? "in" : "out";
  return entry.source === "mcp" && details.direction === ours && details.jsonrpcId !== undefined && !(entry.correlation || {}).mcpRequestId;
};

/** The key joining a request and its response: our mcpRequestId, or for a server's request
 * its session and JSON-RPC id. */
export function keyOf(entry) {
  const correlation = entry.correlation || {};
  const details = entry.details || {};
  if (correlation.mcpRequestId) return details.direction === (entry.kind === "mcp.request" ? "out" : "in") ? correlation.mcpRequestId : null;
  if (!isServers(entry)) return null;
  return `${correlation.mcpSessionId} ${details.jsonrpcId}`;
}

export class Settlements {
  constructor() {
    this.responses = new Map(); // join key (keyOf) -> the response's entry
  }

  /** Note `entry`; the join key of its request when it is a response (that row changes). */
  note(entry) {
    if (entry.source !== "mcp" || (entry.kind !== "mcp.response" && entry.kind !== "mcp.error")) return null;
    const id = keyOf(entry);
    if (!id) return null;
    this.responses.set(id, entry);
    if (this.responses.size > KEPT) this.responses.delete(this.responses.keys().next().value);
    return id;
  }

  /** The response that settled `entry` (a request), if it came. */
  responseOf(entry) {
    if (entry.kind !== "mcp.request" || !isServers(entry) && entry.status !== "running") return undefined;
    const id = keyOf(entry);
    const response = id ? this.responses.get(id) : undefined;
    // A server numbers its requests afresh when it restarts: an answer before this request
    // answered an earlier one.
    return response && response.sequence > entry.sequence ? response : undefined;
  }

  /** `entry`'s status, its request settled by its response (a server's request is running
   * until we answer it). */
  status(entry) {
    const response = this.responseOf(entry);
    if (response) return response.status || "ok";
    return isServers(entry) && entry.kind === "mcp.request" ? "running" : entry.status;
  }

  /** `entry`'s duration, a request's being its response's. */
  duration(entry) {
    const response = this.responseOf(entry);
    return response ? response.durationMs : entry.durationMs;
  }
}
