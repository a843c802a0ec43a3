"""What our MCP client answers the servers' requests: roots, sampling and elicitation.

Theory of operation (all of it on the bridge's asyncio loop, so no lock):

- Our `ClientSession` declares the three capabilities by being given their callbacks
  (`callbacks(session_id)`, wired in connection.py). Roots are answered at once: the
  project's directory. Sampling (`sampling/createMessage`) and elicitation
  (`elicitation/create`, form mode) are the user's to answer: each becomes a pending request
  (McpServerRequest, `sr_...`), listed by `mcp.requests.list` and answered by
  `mcp.requests.answer`, which resolves the future the callback awaits.
- A request no one answers within mcp-server-request-time is declined on the user's behalf
  (elicitation: `action: decline`; sampling, which has no decline in MCP: a JSON-RPC error),
  so a server's request never hangs its session nor the call that made it ask. One that finds
  mcp-pending-server-requests of its session already waiting is declined the same way at
  once (traced as `declined`): a server asking in a loop holds a bounded list.
- A request's life is traced (kind `mcp.server-request`, its state and id in the details):
  the view learns from the trace that there is something to answer, and when it is gone.
  The JSON-RPC messages themselves are traced by the session's taps like any other.
- An elicitation's accepted content must match its `requestedSchema` (BX1004 otherwise, the
  request still pending); a sampling request accepted without `text` is BX1004 too.
- URL-mode elicitation is declined: the Workbench shows forms, not other sites.
- The SDK (and the model script's stepper) load with the first session's callbacks, not with
  the server: a server that speaks to no MCP server never imports them.
- A server run with a model script (`bundle-server --model-script`) answers sampling requests
  by that script at once, one scripted model per MCP session (as each host session has its
  own): its turns' texts in order, then its `finalText`. Nothing waits for the user then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundle_contract._generated.errors import InvalidRequest, RouteNotFound
from bundle_contract._spec import get_spec
from bundle_server._ids import new_id

if TYPE_CHECKING:
    from mcp import types
    from mcp.client.session import ClientRequestContext

    from bundle_server.model.script import ScriptStepper

Publish = Callable[[str, str, dict[str, str], Any], None]
USER_DECLINED = -1  # the JSON-RPC error code of a sampling request the user did not answer
SAMPLING_MODEL = "bundle-workbench-user"  # the `model` a sampling answer says it came from
SCRIPTED_MODEL = "bundle-scripted-model"  # ... when the model script answered it


@cache
def answer_seconds() -> float:
    value: float = get_spec().limit("mcp-server-request-time")["maximum"] / 1000
    return value


@cache
def pending_limit() -> int:
    """Requests of one session waiting at once at most (`mcp-pending-server-requests`)."""
    value: int = get_spec().limit("mcp-pending-server-requests")["maximum"]
    return value


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class Pending:
    """One server request waiting for the Workbench's answer."""

    request_id: str
    session_id: str
    method: str
    params: dict[str, Any]
    received_at: str
    expires_at: str
    answer: asyncio.Future[dict[str, Any]] = field(repr=False)
    state: str = "pending"
    action: str | None = None

    def record(self) -> dict[str, Any]:
        found = {
            "serverRequestId": self.request_id,
            "mcpSessionId": self.session_id,
            "method": self.method,
            "params": self.params,
            "state": self.state,
            "receivedAt": self.received_at,
            "expiresAt": self.expires_at,
        }
        return found | ({"action": self.action} if self.action else {})


class ServerRequests:
    """The servers' pending requests of every session of one server (module docstring)."""

    def __init__(
        self,
        publish: Publish,
        root: Path | None = None,
        script: Mapping[str, Any] | None = None,
    ) -> None:
        self._publish = publish
        self._root = root
        self._script = script
        self._models: dict[str, ScriptStepper] = {}  # MCP session -> its scripted model
        self._pending: dict[str, Pending] = {}
        self._pattern = get_spec().schemas["McpServerRequestId"]["pattern"]

    def callbacks(self, session_id: str) -> dict[str, Any]:
        """The ClientSession callbacks of one session: they declare our capabilities."""
        from mcp import types  # at the first session (see the module docstring)
        from mcp.types.jsonrpc import INVALID_REQUEST

        async def sampling(
            context: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            if self._script is not None:
                return self._scripted(session_id, params)
            body = await self._ask(session_id, "sampling/createMessage", dumped(params))
            if body is None or body["action"] != "accept":
                why = "expired" if body is None else body.get("why", body["action"])
                return types.ErrorData(
                    code=USER_DECLINED, message=f"the Workbench's user did not answer ({why})"
                )
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=body["text"]),
                model=SAMPLING_MODEL,
                stop_reason="endTurn",
            )

        async def elicitation(
            context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult | types.ErrorData:
            if isinstance(params, types.ElicitRequestURLParams):
                return types.ErrorData(
                    code=INVALID_REQUEST, message="the Workbench answers form elicitation only"
                )
            body = await self._ask(session_id, "elicitation/create", dumped(params))
            if body is None:
                return types.ElicitResult(action="decline")
            content = body.get("content") if body["action"] == "accept" else None
            return types.ElicitResult(action=body["action"], content=content)

        async def roots(context: ClientRequestContext) -> types.ListRootsResult:
            listed = []
            if self._root is not None:
                listed.append(types.Root(uri=self._root.as_uri(), name=self._root.name))  # type: ignore[arg-type]
            return types.ListRootsResult(roots=listed)

        return {
            "sampling_callback": sampling,
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
        }

    def _scripted(
        self, session_id: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        """The model script's answer to a sampling request (see the module docstring)."""
        from mcp import types

        from bundle_server.model.neutral import Message, ModelRequest, Text
        from bundle_server.model.script import ScriptStepper

        model = self._models.get(session_id)
        if model is None:
            assert self._script is not None
            model = self._models[session_id] = ScriptStepper(self._script)
        messages = tuple(
            Message(m.role, (Text(m.content.text),))
            for m in params.messages
            if isinstance(m.content, types.TextContent)
        )
        request = ModelRequest("mcp-sampling", "", messages, params.system_prompt or "")
        reply = model.answer(request)
        self._publish(
            "mcp.server-request",
            "sampling/createMessage answered by the model script",
            {"mcpSessionId": session_id},
            {"method": "sampling/createMessage", "state": "answered", "by": "model script"},
        )
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=reply.text),
            model=SCRIPTED_MODEL,
            stop_reason="endTurn",
        )

    async def _ask(
        self, session_id: str, method: str, params: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Wait for the user's answer (an McpServerRequestAnswer); None once it expired. When
        the session already has `pending_limit()` waiting, a decline at once (with its `why`)."""
        waiting = sum(1 for p in self._pending.values() if p.session_id == session_id)
        if waiting >= pending_limit():
            self._publish(
                "mcp.server-request",
                f"{method} declined: {waiting} requests of this session already wait",
                {"mcpSessionId": session_id},
                {"method": method, "state": "declined", "limit": pending_limit()},
            )
            return {"action": "decline", "why": f"declined: {waiting} requests already wait"}
        now = datetime.now(UTC)
        pending = Pending(
            request_id=new_id(self._pattern),
            session_id=session_id,
            method=method,
            params=params,
            received_at=stamp(now),
            expires_at=stamp(now + timedelta(seconds=answer_seconds())),
            answer=asyncio.get_running_loop().create_future(),
        )
        self._pending[pending.request_id] = pending
        self._trace(pending)
        try:
            return await asyncio.wait_for(asyncio.shield(pending.answer), answer_seconds())
        except TimeoutError:
            pending.state, pending.action = "expired", "decline"
            self._trace(pending)
            return None
        finally:
            # Answered, expired, or the session ended (its call cancelled): no longer pending.
            self._pending.pop(pending.request_id, None)
            if pending.state == "pending":  # cancelled with its session
                pending.state, pending.action = "expired", "cancel"
                self._trace(pending)

    def forget(self, session_id: str) -> None:
        """The session ended: a restarted one starts its scripted model from the beginning."""
        self._models.pop(session_id, None)

    def listed(self, session_id: str) -> list[dict[str, Any]]:
        """McpServerRequest of every pending request of `session_id`, oldest first."""
        return [p.record() for p in self._pending.values() if p.session_id == session_id]

    def answer(self, session_id: str, request_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a pending request; its record. BX1001 when it is not pending (anymore),
        BX1004 when the answer does not fit the request."""
        pending = self._pending.get(request_id)
        if pending is None or pending.session_id != session_id or pending.answer.done():
            raise RouteNotFound(
                "no pending server request with that id on this session (answered, declined"
                " after mcp-server-request-time, or never made)",
                {"serverRequestId": request_id[:64], "mcpSessionId": session_id[:64]},
            )
        action = str(body["action"])
        if action == "accept":
            check_answer(pending, body)
        pending.state, pending.action = "answered", action
        pending.answer.set_result(dict(body))
        self._pending.pop(request_id, None)
        self._trace(pending)
        return pending.record()

    def _trace(self, pending: Pending) -> None:
        summary = f"{pending.method} {pending.state}" + (
            f" ({pending.action})" if pending.action else ""
        )
        details = {
            "serverRequestId": pending.request_id,
            "method": pending.method,
            "state": pending.state,
        } | ({"action": pending.action} if pending.action else {})
        self._publish("mcp.server-request", summary, {"mcpSessionId": pending.session_id}, details)


def dumped(params: Any) -> dict[str, Any]:
    found: dict[str, Any] = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return found


def check_answer(pending: Pending, body: Mapping[str, Any]) -> None:
    """An accepted answer fits its request (BX1004 otherwise)."""
    from jsonschema import Draft202012Validator

    if pending.method == "sampling/createMessage":
        if not isinstance(body.get("text"), str):
            raise InvalidRequest("accepting a sampling request needs the answer's `text`")
        return
    content = body.get("content")
    if not isinstance(content, dict):
        raise InvalidRequest("accepting an elicitation needs the form's `content`")
    requested = pending.params.get("requestedSchema")
    schema = requested if isinstance(requested, dict) else {}
    try:
        Draft202012Validator.check_schema(schema)
        errors = sorted(Draft202012Validator(schema).iter_errors(content), key=str)
    except Exception:
        # Any failure of the server's schema (SchemaError, an unknown type, a $ref to nowhere,
        # a TypeError from a value of the wrong kind) is the server's own business: it cannot
        # hold the user's answer back, which goes as it is.
        errors = []
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "content"
        raise InvalidRequest(
            f"the content does not match the requested schema at {where}: "
            f"{errors[0].message[:200]}",
            {"serverRequestId": pending.request_id},
        )
