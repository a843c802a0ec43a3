"""The subscriptions a multiplexed stream carries: each stream route's frames, as a `Source`.

Theory of operation: a subscription names a stream route of routes.toml (`route`) with that
route's path parameters and query values. `subscribe` checks them as the route itself would
(`path_params`, `query_values`: the same schemas, the same error codes), then subscribes to
the same hub or session the route's handler would, so every error a subscription can meet is
the one its own stream answers, told as its `multiplex.error` frame. `SOURCES` is the table
of routes a multiplexed stream carries: one row per route, naming how to subscribe.

- `HubSource` (trace, logs, project events): the replay after the cursor (with the gap frame
  first when history was dropped), then live frames, exactly the frames `ndjson_stream` writes
  for the route; the keep-alives are the multiplexed stream's own. It takes live frames from
  its hub in steps of `TAKE_FRAMES`, so the rest stay behind its position, where the hub sees
  them: a reader that falls behind the history is cut by the hub as a stream reader is
  (`multiplex.closed` `lagged`: subscribe again from the last sequence seen, and the gap
  says what was missed). When the hub cuts it while its writer is blocked on the connection,
  it drops the replay it still held at once, so a stalled tab holds nothing of the history.
- `SessionSource` (host sessions): `state` with the record, one `output` with the retained
  bytes, then `state`/`output`/`end` as the session stream sends them (`end` is followed by
  `multiplex.closed` `ended`). Pacing replaces the TCP back-pressure a stream of its own has:
  it sends at most `session_window` output bytes beyond what the page said it consumed
  (`consumed`), then takes nothing more, so its subscription's queue fills and holds the PTY
  (or is cut after `subscriber-stall-time` while another reader reads: `lagged`, subscribe
  again for a fresh replay), exactly as a slow reader of the session stream does. Progress
  is reported after each write, as the session stream does.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from bundle_contract._generated.errors import (
    ServiceUnavailable,
    SessionServiceUnavailable,
    SubscriptionTargetUnknown,
)
from bundle_server._http.request import path_params, query_values, request_error
from bundle_server._http.routing import Route, ServerState, route_rows
from bundle_server._streams.multiplexed import (
    Source,
    closed_of,
    event_head,
    event_of,
    frame_head,
    frame_of,
)
from bundle_server._streams.sequenced import SequencedHub, SubscriberLagged, encode_frame
from bundle_server._utf8 import json_text, utf8
from bundle_server.logs.hub import LogHub
from bundle_server.project.manager import ProjectLoop
from bundle_server.sessions.pty import Frame, SessionManager
from bundle_server.trace.hub import TraceHub

# Live frames a hub source takes at a time: what it holds between rounds stays small.
TAKE_FRAMES = 256
Wake = Callable[[], None]


class HubSource:
    """A subscription to a sequenced hub (the trace, the raw logs, the project events)."""

    def __init__(self, subscription: str, hub: SequencedHub, after: int, wake: Wake) -> None:
        self._id = subscription
        self._head = frame_head(subscription)
        replay, frames, self._subscription = hub.subscribe_frames(after, wake)
        self._lock = threading.Lock()  # `_cut` runs in the publisher's thread
        self._replay: deque[bytes] = deque(frames)
        if "gap" in replay:
            self._replay.appendleft(encode_frame(replay["gap"]))
        self._subscription.on_cut = self._cut
        self._wake = wake
        self.done = False

    def _cut(self) -> None:
        # The hub cut this reader (history moved past it) while its writer may be blocked on
        # the connection: what it still held of the replay goes now.
        with self._lock:
            self._replay.clear()
        self._wake()

    def take(self, budget: int) -> list[bytes]:
        out: list[bytes] = []
        size = 0
        while size < budget and not self.done:
            with self._lock:
                frame = self._replay.popleft() if self._replay else None
            if frame is None:
                try:
                    frames = self._subscription.take_frames(TAKE_FRAMES)
                except SubscriberLagged:
                    return self._end(out, "lagged")
                except ServiceUnavailable:
                    return self._end(out, "ended")
                if not frames:
                    break
                with self._lock:
                    self._replay.extend(frames)
                continue
            wrapped = frame_of(self._head, frame)
            out.append(wrapped)
            size += len(wrapped)
        return out

    def _end(self, out: list[bytes], reason: str) -> list[bytes]:
        self.done = True
        with self._lock:
            self._replay.clear()
        out.append(closed_of(self._id, reason))
        return out

    def wrote(self) -> None:
        pass

    def consumed(self, total: int) -> None:
        pass

    def close(self) -> None:
        self._subscription.cancel()
        with self._lock:
            self._replay.clear()


def _session_data(session: Mapping[str, Any]) -> bytes:
    return utf8(json_text({"session": session}))


class SessionSource:
    """A subscription to a host session's stream, paced by what the page consumed."""

    def __init__(
        self, subscription: str, sessions: SessionManager, session_id: str, wake: Wake, window: int
    ) -> None:
        self._id = subscription
        replay, self._subscription = sessions.subscribe(session_id, wake)
        self._output_head = event_head(subscription, "output") + b'{"data":"'
        self._window = window
        self._batch: deque[Frame] = deque(
            [Frame("state", session=replay.session), Frame.output(replay.output)]
        )
        self._sent = 0  # output bytes handed out
        self._consumed = 0  # output bytes the page said it took in
        self._took = False
        self.done = False

    def _encode(self, frame: Frame) -> bytes:
        if frame.event == "output":
            self._sent += len(frame.data)
            return b"".join((self._output_head, *frame.encoded, b'"}}\n'))
        return event_of(self._id, frame.event, _session_data(frame.session))

    def take(self, budget: int) -> list[bytes]:
        out: list[bytes] = []
        size = 0
        while size < budget and not self.done:
            if not self._batch:
                if self._sent - self._consumed >= self._window:
                    break  # the page is behind: its queue fills and paces the PTY
                try:
                    frames = self._subscription.take()
                except SubscriberLagged:
                    self.done = True
                    out.append(closed_of(self._id, "lagged"))
                    break
                if not frames:
                    break
                self._batch.extend(frames)
            frame = self._batch.popleft()
            encoded = self._encode(frame)
            out.append(encoded)
            size += len(encoded)
            if frame.event == "end":
                self.done = True
                out.append(closed_of(self._id, "ended"))
        self._took = bool(out)
        return out

    def wrote(self) -> None:
        if self._took:
            self._subscription.progressed()

    def consumed(self, total: int) -> None:
        # A total, never more than was sent: a late or repeated request changes nothing, and a
        # page cannot open the window past what it was given.
        self._consumed = max(self._consumed, min(total, self._sent))

    def close(self) -> None:
        self._subscription.cancel()
        self._batch.clear()


@dataclass(frozen=True)
class Target:
    """How a subscription to one stream route is made, given its checked params and query."""

    subscribe: Callable[[ServerState, str, Mapping[str, Any], Mapping[str, Any], Wake, int], Source]


def _hub(find: Callable[[ServerState], SequencedHub]) -> Target:
    """Subscriptions of the sequenced hub that `find` reads from the server's services."""

    def subscribe(
        state: ServerState,
        subscription: str,
        params: Mapping[str, Any],
        query: Mapping[str, Any],
        wake: Wake,
        window: int,
    ) -> Source:
        return HubSource(subscription, find(state), query["after"], wake)

    return Target(subscribe)


def _session(
    state: ServerState,
    subscription: str,
    params: Mapping[str, Any],
    query: Mapping[str, Any],
    wake: Wake,
    window: int,
) -> Source:
    sessions = state.service(SessionManager)
    if sessions.closed:
        raise SessionServiceUnavailable("the host-session service is closed")
    return SessionSource(subscription, sessions, params["sessionId"], wake, window)


# The stream routes a multiplexed stream carries, by route id (routes.toml).
SOURCES: dict[str, Target] = {
    "sessions.stream": Target(_session),
    "trace.stream": _hub(lambda state: state.service(TraceHub)),
    "logs.stream": _hub(lambda state: state.service(LogHub)),
    "project.stream": _hub(lambda state: state.service(ProjectLoop).hub),
}


@cache
def _routes() -> dict[str, Route]:
    return {row["id"]: row for row in route_rows() if row["id"] in SOURCES}


def subscribe(
    state: ServerState,
    request: Mapping[str, Any],
    wake: Wake,
    window: int,
) -> Source:
    """The source of one subscription request (MultiplexSubscription.json); raises what its
    route would answer (or BX1011 for a route the stream does not carry)."""
    route = _routes().get(request["route"])
    if route is None:
        raise SubscriptionTargetUnknown(
            f"a multiplexed stream carries {', '.join(sorted(SOURCES))}, not {request['route']}",
            {"route": request["route"], "routes": sorted(SOURCES)},
        )
    given = request.get("params", {})
    missing = sorted(set(route.get("params", {})) - set(given))
    if missing:
        raise request_error(route)(
            f"path parameter {missing[0]!r} is required", {"parameter": missing[0]}
        )
    params = path_params(route, {name: given[name] for name in route.get("params", {})})
    raw = {name: str(value) for name, value in request.get("query", {}).items()}
    query = query_values(route, raw)
    return SOURCES[route["id"]].subscribe(state, request["id"], params, query, wake, window)
