"""The PTY engine of host sessions: spawn a coding-agent host on a pseudo-terminal, stream its
output, feed it input, resize it, and end it and everything it started.

`SessionManager` is the whole API the HTTP layer needs; `Frame`, `SessionReplay` and
`OutputSubscription` are what `subscribe` hands out. Each module's docstring gives its part of
the theory of operation:

- `_manager.py`: the registry, the active-session cap, close;
- `_session.py`: one session, its greenlets, the terminate ladder;
- `_output.py`: retained output, output frames with their base64 (`Chunk`), bounded
  subscribers;
- `_process.py`: the child on its PTY, reaping, finding what it left behind;
- `_hosts.py`: host availability and executable resolution;
- `_attach.py`: applying a host's attach plan (a home of the session's own, the host CLI's
  own install commands) before it starts;
- `_engine.py`: the thread and gevent hub the sessions' I/O runs in.

Serving a session stream (seed 000, "Host-session stream") from a request greenlet:

    waker = GreenWaker()
    replay, subscription = manager.subscribe(session_id, waker.wake)   # AB8261 / AB8262
    send("state", {"session": replay.session})
    send("output", {"data": b64encode(replay.output)})                 # up to 256 KiB
    loop: frames = subscription.take()       # SubscriberLagged: cut, close the stream
          for each frame: send(frame.event, {"data": b"".join(frame.encoded)}  # output
                                            or {"session": frame.session})     # state, end
          stop after the `end` frame; when no frame came, waker.wait(keepalive) else a comment
    finally: subscription.cancel(); waker.close()
"""

from bundle_server.sessions.pty._hosts import availability, host_kinds
from bundle_server.sessions.pty._manager import SessionManager, new_session_id, utf8
from bundle_server.sessions.pty._output import Frame, OutputSubscription
from bundle_server.sessions.pty._session import SessionReplay

__all__ = [
    "Frame",
    "OutputSubscription",
    "SessionManager",
    "SessionReplay",
    "availability",
    "host_kinds",
    "new_session_id",
    "utf8",
]
