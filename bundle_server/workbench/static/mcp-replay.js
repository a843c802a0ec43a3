// Replay, and Edit and replay, of a protocol row: a tools/call or prompts/get our client sent.
// The arguments are the request's own, read from its kept message (mcp-message.js). Replay
// sends the same operation again through the operations route; Edit and replay opens the MCP
// view's form of that tool or prompt filled with them (`/mcp?session=&tool=&args=<json>`, which
// the MCP view reads).
import { postJSON } from "/assets/api.js";
import { loadMessage } from "/assets/mcp-message.js";

const SUBJECTS = { "tools/call": "tool", "prompts/get": "prompt" };

/** Whether `entry` is a request of ours that can be replayed. */
export function replayable(entry) {
  const details = entry.details || {};
  return (
    entry.kind === "mcp.request" &&
    details.direction === "out" &&
    details.method in SUBJECTS &&
    typeof details.messageId === "string"
  );
}

/** The request's name and arguments, from its kept message (an error when it is not whole). */
async function requestOf(entry) {
  const record = await loadMessage(entry.details.messageId);
  if (record.truncated) throw new Error("the request was kept cut: its arguments are not whole");
  const params = record.message.params || {};
  if (typeof params.name !== "string") throw new Error("the request names no tool or prompt");
  return { method: entry.details.method, name: params.name, arguments: params.arguments || {} };
}

/** Send the request of `entry` again on `session`; what came of it, in words. */
export async function replay(session, entry) {
  const request = await requestOf(entry);
  const answer = await postJSON(`/api/mcp/sessions/${encodeURIComponent(session)}/operations`, {
    method: request.method,
    params: { name: request.name, arguments: request.arguments },
  });
  const outcome = answer.outcome;
  if (outcome.error) return `Replayed: error ${outcome.error.code}: ${outcome.error.message}`;
  if (outcome.result && outcome.result.isError === true) return "Replayed: the tool answered isError: true";
  return `Replayed: ok (${outcome.durationMs} ms)`;
}

/** The MCP view's address with the form of `entry`'s tool or prompt and its arguments. */
export async function editHref(session, entry) {
  const request = await requestOf(entry);
  const query = new URLSearchParams({ session, [SUBJECTS[request.method]]: request.name });
  query.set("args", JSON.stringify(request.arguments));
  return `/mcp?${query}`;
}
