// A request's row settles when its response arrives. The unified trace is append-only: an
// entry, once numbered, never changes (replay and resumed streams hand out the same entries by
// sequence), so a request's entry keeps `status: running` for good. The views join instead:
// the response (mcp.response or mcp.error, the same `mcpRequestId`) gives its request's row
// the final status and duration.

const KEPT = 20000; // responses remembered (more than the trace retains entries)

export class Settlements {
  constructor() {
    this.responses = new Map(); // mcpRequestId -> the response's entry
  }

  /** Note `entry`; its request's mcpRequestId when it is a response (that row changes). */
  note(entry) {
    if (entry.source !== "mcp" || (entry.kind !== "mcp.response" && entry.kind !== "mcp.error")) return null;
    const id = entry.correlation && entry.correlation.mcpRequestId;
    if (!id || (entry.details && entry.details.direction === "out")) return null;
    this.responses.set(id, entry);
    if (this.responses.size > KEPT) this.responses.delete(this.responses.keys().next().value);
    return id;
  }

  /** The response that settled `entry` (a request), if it came. */
  responseOf(entry) {
    if (entry.kind !== "mcp.request" || entry.status !== "running") return undefined;
    const id = entry.correlation && entry.correlation.mcpRequestId;
    return id ? this.responses.get(id) : undefined;
  }

  /** `entry`'s status, its request settled by its response. */
  status(entry) {
    const response = this.responseOf(entry);
    return response ? response.status || "ok" : entry.status;
  }

  /** `entry`'s duration, a request's being its response's. */
  duration(entry) {
    const response = this.responseOf(entry);
    return response ? response.durationMs : entry.durationMs;
  }
}
