"""The open multiplexed streams of one server, by id, and the subscriptions they are asked for.

Theory of operation: opening a stream makes a `MultiplexedStream` under a fresh random id (16
bytes, URL-safe: `MultiplexStreamId.json`) and remembers it until its response is over (the
client left, or the server closed it). The short requests that change a stream find it here
by id (BX1010 when it is gone). `subscribe` turns each subscription request into a source,
or into that subscription's error frame: an unknown route, a bad parameter or cursor, a
session that does not exist, an id in use or already unsubscribed on the stream (its DELETE
may overtake its subscribe), one past `multiplex-subscriptions`; the stream and its other
subscriptions go on. Every stream lives in the server's thread (its greenlet and
the requests'); only `close()`, at shutdown, may come from another.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import MultiplexStreamNotFound, SubscriptionRefused
from bundle_contract._spec import get_spec
from bundle_server._http.routing import ServerState
from bundle_server._streams.hangup import Hangup
from bundle_server._streams.multiplexed import MultiplexedStream
from bundle_server._streams.sequenced import encode_frame
from bundle_server.multiplex.sources import subscribe

STREAM_ID_BYTES = 16


@cache
def subscription_limit() -> int:
    """Active subscriptions of one stream at most (`multiplex-subscriptions`)."""
    limit: int = get_spec().limit("multiplex-subscriptions")["maximum"]
    return limit


@cache
def default_session_window() -> int:
    """Session output bytes sent past what the page consumed (`multiplex-session-window`)."""
    window: int = get_spec().limit("multiplex-session-window")["maximum"]
    return window


class MultiplexService:
    """The server's open multiplexed streams."""

    def __init__(self, session_window: int | None = None) -> None:
        self._window = session_window if session_window is not None else default_session_window()
        self._streams: dict[str, MultiplexedStream] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def open(self, keepalive: float, hangup: Hangup | None) -> MultiplexedStream:
        stream = MultiplexedStream(
            secrets.token_urlsafe(STREAM_ID_BYTES),
            keepalive=keepalive,
            session_window=self._window,
            hangup=hangup,
        )
        with self._lock:
            self._streams[stream.id] = stream
            if self._closed:
                stream.close()
        return stream

    def opened_frame(self, stream: MultiplexedStream) -> bytes:
        return encode_frame(
            {"type": "multiplex.opened", "streamId": stream.id, "sessionWindow": self._window}
        )

    def forget(self, stream: MultiplexedStream) -> None:
        with self._lock:
            if self._streams.get(stream.id) is stream:
                del self._streams[stream.id]

    def get(self, stream_id: str) -> MultiplexedStream:
        stream = self._streams.get(stream_id)
        if stream is None or stream.closed:
            raise MultiplexStreamNotFound(
                "no open multiplexed stream has this id: open a new one", {"streamId": stream_id}
            )
        return stream

    def subscribe(
        self,
        state: ServerState,
        stream: MultiplexedStream,
        requests: Iterable[Mapping[str, Any]],
    ) -> None:
        """Add each requested subscription to `stream`, or tell it its refusal."""
        for request in requests:
            subscription = request["id"]
            try:
                if stream.has(subscription):
                    raise SubscriptionRefused(
                        f"subscription id {subscription} is in use on this stream",
                        {"subscription": subscription},
                    )
                if stream.active >= subscription_limit():
                    raise SubscriptionRefused(
                        f"a multiplexed stream carries {subscription_limit()} subscriptions"
                        " at most",
                        {"subscription": subscription, "limit": subscription_limit()},
                    )
                source = subscribe(state, request, stream.wake, self._window)
                # Checked once the source is made, with no wait before `add`: a DELETE that
                # arrived while it was being made counts too.
                if stream.was_removed(subscription):
                    source.close()
                    raise SubscriptionRefused(
                        f"subscription id {subscription} was unsubscribed on this stream:"
                        " subscribe under a fresh id",
                        {"subscription": subscription},
                    )
            except ContractError as error:
                stream.refuse(subscription, error)
                continue
            stream.add(subscription, source)

    def close_streams(self) -> None:
        """End every open stream (their pages open new ones, resuming each subscription)."""
        with self._lock:
            streams = list(self._streams.values())
        for stream in streams:
            stream.close()

    def close(self) -> None:
        """End every open stream and refuse new ones (the server is stopping)."""
        with self._lock:
            self._closed = True
        self.close_streams()
