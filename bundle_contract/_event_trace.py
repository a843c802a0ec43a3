"""Kernel event tracing (seed 001, "Event trace").

Theory of operation: an execution of one canonical event (`event_trace_execution`) gets one
tracer (`create_event_tracer`). Each tracer method emits at most one frozen event, a pyrsistent
`PMap` shaped like `spec/schemas/EventTraceEvent.json` (`pyrsistent.thaw(event)` is its JSON
value), and hands it to the observer: the tracer's own, or else the process-local observer
read at the moment of emission (`install_event_trace_observer`).

The tracer follows the machine `event-trace-execution` of spec/states.toml: it is `open` until
it emits `failure`, then `failed`, where every method emits nothing. Tracing must never break
the traced code, so tracer methods never raise: a bad argument emits nothing, an observer's
exception is swallowed, any internal error is swallowed. Only control-flow exceptions that are
not `Exception`s (KeyboardInterrupt, SystemExit, gevent's GreenletExit) pass through.

`at` is monotonic milliseconds read from the tracer's clock (seconds, `time.monotonic` by
default), never below 0 and never decreasing across one tracer's events even when the clock
goes backwards, raises or returns garbage. `durationMs` is the distance from the start of the
same phase that this tracer emitted and no finish (or failure) has matched yet: a start is
matched once, so a second finish without a new start carries no duration.

Importing this module is light; the family list is read from the spec once, on first use of
`event_trace_execution`.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final, Literal

from pyrsistent import pmap
from pyrsistent.typing import PMap

from bundle_contract._generated import vocabulary as _vocabulary

__all__ = [
    "MESSAGE_LIMIT",
    "OUTCOMES",
    "PHASES",
    "RUNTIMES",
    "EventTraceError",
    "EventTraceEvent",
    "EventTraceExecution",
    "EventTraceObserver",
    "EventTracer",
    "Outcome",
    "Phase",
    "Runtime",
    "create_event_tracer",
    "event_families",
    "event_trace_execution",
    "event_trace_observer",
    "install_event_trace_observer",
    "summarize_event_trace_error",
]

Phase = Literal["handler", "execute", "providers", "render"]
Outcome = Literal["render", "continue", "deny"]
Runtime = Literal["shared", "standalone"]

PHASES: Final[tuple[str, ...]] = ("handler", "execute", "providers", "render")
OUTCOMES: Final[tuple[str, ...]] = ("render", "continue", "deny")
RUNTIMES: Final[tuple[str, ...]] = ("shared", "standalone")

MESSAGE_LIMIT: Final[int] = _vocabulary.TRACE_ERROR_MESSAGE_MAX  # limit trace-error-message
"""Longest `message` (and `code`) of a summarized error, in characters."""

EventTraceEvent = PMap[str, Any]
"""One frozen trace event; `pyrsistent.thaw(event)` gives its JSON value."""

EventTraceError = PMap[str, str]
"""A frozen `{name, message, code?}`: a summarized error, never a stack."""

EventTraceObserver = Callable[[EventTraceEvent], object]

_ID_ALPHABET: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
_ID_LENGTH: Final = 16
_STACK_MARKER: Final = "Traceback (most recent call last)"
_ELLIPSIS: Final = "\u2026"


@cache
def event_families() -> frozenset[str]:
    """The 22 canonical family names of spec/events.toml (generated: no spec load here)."""
    from bundle_contract._generated.vocabulary import FAMILIES

    return frozenset(FAMILIES)


def _new_execution_id() -> str:
    number = secrets.randbelow(len(_ID_ALPHABET) ** _ID_LENGTH)
    digits = []
    for _ in range(_ID_LENGTH):
        number, digit = divmod(number, len(_ID_ALPHABET))
        digits.append(_ID_ALPHABET[digit])
    return "ex_" + "".join(digits)


@dataclass(frozen=True, slots=True)
class EventTraceExecution:
    """Identity of one kernel execution of a canonical event (EventTraceExecution.json)."""

    event: str
    execution_id: str
    host: str
    native_event: str
    _json: PMap[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "_json",
            pmap(
                {
                    "event": self.event,
                    "executionId": self.execution_id,
                    "host": self.host,
                    "nativeEvent": self.native_event,
                }
            ),
        )

    def to_json(self) -> PMap[str, str]:
        """The frozen JSON shape: `{event, executionId, host, nativeEvent}`."""
        return self._json


def event_trace_execution(
    event: str, host: str, native_event: str, execution_id: str | None = None
) -> EventTraceExecution:
    """A new execution; a fresh `executionId` (`ex_` + 16 base36 characters) unless given.

    Raises ValueError when `event` is not one of the 22 families, `host` or a given
    `execution_id` is not a non-empty string, or `native_event` is not a string.
    """
    if not isinstance(event, str) or event not in event_families():
        raise ValueError(f"event {event!r} is not one of the canonical event families")
    if not isinstance(host, str) or not host:
        raise ValueError(f"host {host!r} is not a compiled target name (a non-empty string)")
    if not isinstance(native_event, str):
        raise ValueError(f"nativeEvent {native_event!r} is not a string")
    if execution_id is None:
        execution_id = _new_execution_id()
    elif not isinstance(execution_id, str) or not execution_id:
        raise ValueError(f"executionId {execution_id!r} is not a non-empty string")
    return EventTraceExecution(
        event=event, execution_id=execution_id, host=host, native_event=native_event
    )


# The process-local observer: read at every emission of a tracer without its own observer.
_process_observer: EventTraceObserver | None = None
_observer_lock = threading.Lock()


def event_trace_observer() -> EventTraceObserver | None:
    """The process-local observer, or None."""
    return _process_observer


def install_event_trace_observer(observer: EventTraceObserver | None) -> Callable[[], None]:
    """Set (or with None, clear) the process-local observer; returns a function restoring
    the observer that was installed before this call."""
    global _process_observer
    with _observer_lock:
        previous = _process_observer
        _process_observer = observer

    def restore() -> None:
        global _process_observer
        with _observer_lock:
            _process_observer = previous

    return restore


def _bounded(text: str) -> str:
    cut = text.find(_STACK_MARKER)
    if cut >= 0:
        text = text[:cut].rstrip()
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 1] + _ELLIPSIS
    return text


def summarize_event_trace_error(error: object) -> EventTraceError:
    """`{name, message, code?}` of any error or object; never raises, never a stack.

    `name` is the exception's class name ("Error" for anything not an exception), `message`
    is `str(error)` cut before any traceback and bounded to MESSAGE_LIMIT characters, and
    `code` is the error's `code` attribute when that is a non-empty string.
    """
    name = "Error"
    try:
        if isinstance(error, BaseException):
            name = str(type(error).__name__) or "Error"
    except Exception:
        name = "Error"
    try:
        message = _bounded(str(error))
    except Exception:
        message = f"<unprintable {name}>"
    summary: dict[str, str] = {"name": name, "message": message}
    try:
        code = getattr(error, "code", None)
        if isinstance(code, str) and code:
            summary["code"] = _bounded(str(code))
    except Exception:
        pass
    return pmap(summary)


def _member(value: object, allowed: tuple[str, ...]) -> str | None:
    """`value` as a plain str when it is one of `allowed`, else None; never raises (a str
    subclass with a hostile `__eq__` or `__str__` is read through `str.__str__`)."""
    try:
        if isinstance(value, str):
            plain = str.__str__(value)
            if plain in allowed:
                return plain
    except Exception:
        pass
    return None


def _count(value: object) -> int | None:
    """`value` as a plain non-negative int (bool is not a count), else None; never raises."""
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            plain = int.__int__(value)
            if plain >= 0:
                return plain
    except Exception:
        pass
    return None


class EventTracer:
    """Emits the trace events of one execution; see the module docstring for the rules."""

    __slots__ = (
        "_clock",
        "_execution",
        "_failed",
        "_last_at",
        "_lock",
        "_observer",
        "_sequence",
        "_starts",
    )

    def __init__(
        self,
        execution: EventTraceExecution,
        observer: EventTraceObserver | None,
        clock: Callable[[], float],
    ) -> None:
        self._execution = execution.to_json()
        self._observer = observer
        self._clock = clock
        self._sequence = 0
        self._last_at = 0.0
        self._starts: dict[str, float] = {}
        self._failed = False
        # Reentrant: an observer may itself call the tracer; events are delivered in order.
        self._lock = threading.RLock()

    @property
    def failed(self) -> bool:
        """True once `failure` was emitted: the tracer emits nothing more."""
        return self._failed

    def handler_start(self) -> None:
        self._emit("handler.start", "handler", start=True)

    def handler_outcome(self, outcome: Outcome) -> None:
        value = _member(outcome, OUTCOMES)
        if value is not None:
            self._emit("handler.outcome", "handler", {"outcome": value}, finish=True)

    def execute_start(self, runtime: Runtime) -> None:
        value = _member(runtime, RUNTIMES)
        if value is not None:
            self._emit("execute.start", "execute", {"runtime": value}, start=True)

    def providers_start(self) -> None:
        self._emit("providers.start", "providers", start=True)

    def providers_finish(self, count: int) -> None:
        value = _count(count)
        if value is not None:
            self._emit("providers.finish", "providers", {"count": value}, finish=True)

    def render_start(self) -> None:
        self._emit("render.start", "render", start=True)

    def render_finish(self) -> None:
        self._emit("render.finish", "render", finish=True)

    def failure(self, phase: Phase, error: object) -> None:
        value = _member(phase, PHASES)
        if value is not None:
            self._emit("failure", value, {"error": error}, finish=True, terminal=True)

    def _now(self) -> float:
        try:
            at = float(self._clock()) * 1000.0
        except Exception:
            return self._last_at
        if not math.isfinite(at) or at <= self._last_at:
            return self._last_at
        return at

    def _emit(
        self,
        kind: str,
        phase: str,
        extra: dict[str, Any] | None = None,
        *,
        start: bool = False,
        finish: bool = False,
        terminal: bool = False,
    ) -> None:
        try:
            with self._lock:
                if self._failed:
                    return
                if terminal and extra is not None:
                    extra = {"error": summarize_event_trace_error(extra["error"])}
                at = self._now()
                fields: dict[str, Any] = {
                    "at": at,
                    "execution": self._execution,
                    "kind": kind,
                    "phase": phase,
                    "sequence": self._sequence + 1,
                }
                if extra:
                    fields.update(extra)
                started = self._starts.get(phase) if finish else None
                if started is not None:
                    fields["durationMs"] = at - started
                event: EventTraceEvent = pmap(fields)
                self._sequence += 1
                self._last_at = at
                if start:
                    self._starts[phase] = at
                elif finish:
                    self._starts.pop(phase, None)  # a start is matched by one finish only
                if terminal:
                    self._failed = True
                observer = self._observer if self._observer is not None else _process_observer
                if observer is not None:
                    with contextlib.suppress(Exception):
                        observer(event)
        except Exception:
            pass


def create_event_tracer(
    execution: EventTraceExecution,
    *,
    observer: EventTraceObserver | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> EventTracer:
    """A tracer for one execution. With no `observer`, each emission goes to the
    process-local observer installed at that moment (if any)."""
    if not isinstance(execution, EventTraceExecution):
        raise ValueError(f"{execution!r} is not an EventTraceExecution")
    if observer is not None and not callable(observer):
        raise ValueError(f"observer {observer!r} is not callable")
    if not callable(clock):
        raise ValueError(f"clock {clock!r} is not callable")
    return EventTracer(execution, observer, clock)
