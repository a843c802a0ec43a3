"""The generated hook wrapper's run: one native hook call answered by one project handler.

    $ "$CLAUDE_PLUGIN_ROOT"/hooks/PreToolUse < native.json     # a wrapper calls run(...)
    {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny",...}}

Theory of operation. A host spawns the wrapper for every hook call, with its native JSON on
stdin, and reads the answer from stdout. `run`:

1. reads the native input (bounded by limit hook-native-input-bytes) and builds the handler
   payload from it: each payload field from the native key hooks.toml `payload_source` and
   hosts.toml name for this host and handler event, after the key's decode step; the payload
   must then conform to HookPayloads.json (compiled, like every table here, into
   `_generated/hook_io.py`);
2. imports the handler `module:function` with the artifact's `src/` first on sys.path and calls
   it with (payload, context). Steps 1 to 3 run under one deadline, the native timeout less
   limit hook-wrapper-margin, enforced with SIGALRM: a host that never closes stdin, a slow
   import and a slow handler are cut off alike (a second alarm half a margin later ends the
   process if the handler swallows the first);
3. validates the result (rule 5, `validate_hook_result`) and writes it as the host's native
   answer (hosts.toml `hook_output`), then closes stdout, so the host has its answer before any
   observation happens;
4. posts a payload-free EventTraceReceipt (handler.start, then handler.outcome or failure)
   with `post_receipt`, cut to end half a margin before the native timeout.

Failure policy (hooks.toml `[wrapper]`): undecodable input, a handler that cannot be imported,
raises, runs past its deadline or returns an illegal result never fails the host's hook. The
host gets the plain continue answer (nothing on stdout), stderr gets one line, the receipt a
`failure` event, and the exit status is 0 whatever happens. `_event_trace` (pyrsistent) is
imported for the error summary on that path only.

While the handler runs, fd 1 points at stderr: a stray print() in user code must not corrupt
the answer; the answer goes to the saved stdout descriptor.

Import cost: a fresh process per tool call, so this module loads only json, os, signal, sys,
time, types and importlib (already loaded by the package), the generated tables, and
`_hook_results`; `_receipt_wrapper` (socket) is
imported only when a dev server may be listening. No `typing` at run time.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from types import MappingProxyType

from bundle_contract._error_bases import GeneratedErrors
from bundle_contract._generated import hook_io, runtime
from bundle_contract._hook_results import validate_hook_result

TYPE_CHECKING = False  # see bundle_contract/__init__.py: typing stays off the hook-time path
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from bundle_contract._generated import errors

    Fields = tuple[tuple[str, str, str | None], ...]  # (payload field, native key, decode step)
    Pairs = tuple[tuple[tuple[str, ...], Any], ...]  # (path, value or placeholder)

else:
    errors = GeneratedErrors()  # loaded when something goes wrong

# The generated module is untyped literal data; these names give it types (mypy infers the
# literals' types as wider than their shapes, hence the two ignores).
BINDINGS: Mapping[str, Mapping[str, tuple[str, str, Fields]]] = hook_io.BINDINGS  # type: ignore[assignment]
OUTPUTS: Mapping[str, Mapping[str, Mapping[str, Pairs | None]]] = hook_io.OUTPUTS  # type: ignore[assignment]
FAMILIES: Mapping[str, str] = hook_io.EVENT_FAMILIES
EMPTY_ANSWERS: Mapping[str, str] = hook_io.EMPTY_ANSWERS
PRESENT: Mapping[str, Mapping[str, tuple[str, ...]]] = hook_io.PRESENT
REQUIRED: Mapping[str, tuple[str, ...]] = hook_io.REQUIRED
PAYLOAD_CHECKS: Mapping[str, tuple[Callable[[object], bool], Callable[[object], Any]]]
PAYLOAD_CHECKS = hook_io.PAYLOAD_CHECKS
DECODE_ACCEPTS: Mapping[str, Callable[[object], bool]] = hook_io.DECODE_ACCEPTS

READ_CHUNK = 65536
STDERR_LINE_MAX = 400  # one readable line, whatever the error's message holds
_ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"  # executionId: as _event_trace makes it


class HandlerTimeout(BaseException):
    """The handler ran past its deadline.

    A BaseException, so that a handler's `except Exception` cannot swallow it."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_string(raw: str) -> Any:
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise errors.NativeDecodeFailed(
            "a json-string value is not a JSON-encoded string"
        ) from None


def _positive_count(raw: int) -> bool:
    return raw > 0


def _level(raw: str | Mapping[str, Any]) -> Any:
    return raw if isinstance(raw, str) else raw["level"]


# Decode steps of events.toml, as _canonical implements them; a test keeps the names equal.
STEPS: Mapping[str, Callable[[Any], Any]] = {
    "json-string": _json_string,
    "positive-count": _positive_count,
    "level": _level,
}


# --------------------------------------------------------------------------------------------
# The pure core: payload in, answer and receipt out


def binding(host: str, event: str) -> tuple[str, str, Fields]:
    """(native event, family, ((payload field, native key, decode step), ...)) of one handler
    event on one host kind; raises UnknownHandlerEvent or UnknownNativeEvent."""
    if event not in FAMILIES:
        raise errors.UnknownHandlerEvent(f"unknown handler event {event!r}", {"event": str(event)})
    found = BINDINGS.get(host, {}).get(event)
    if found is None:
        raise errors.UnknownNativeEvent(
            f"{host} has no native event for the {event} handler event",
            {"host": str(host), "event": event},
        )
    return found


def handler_payload(
    host: str, event: str, native_input: object, dropped: list[str] | None = None
) -> dict[str, Any]:
    """The handler payload of `event` built from one native input of `host`.

    A key the host did not send leaves its field absent. An optional field whose value fails
    its decode step or its kind is left out too, and named in `dropped` when given: a host
    that changes the shape of a field the handler may not even read (Claude's effort) must
    never keep a safety handler from running. Raises NativeDecodeFailed when the input is not
    an object, or a required field is missing, fails its decode step or is of the wrong kind.
    Messages name fields and keys, never values: they end up in receipts.
    """
    required = REQUIRED[event]
    left_out = dropped if dropped is not None else []
    native, _family, fields = binding(host, event)
    where = {"host": host, "nativeEvent": native}
    if not isinstance(native_input, dict):
        kind = type(native_input).__name__
        raise errors.NativeDecodeFailed(
            f"{host} {native}: the input is a {kind}, not an object", where
        )
    payload: dict[str, Any] = {}
    for name, key, step in fields:
        if key not in native_input:
            continue
        value = native_input[key]
        if step is not None:
            if not DECODE_ACCEPTS[step](value) and name not in required:
                left_out.append(name)
                continue
            if not DECODE_ACCEPTS[step](value):
                raise errors.NativeDecodeFailed(
                    f"{host} {native}: {key} ({name}): {step} cannot decode a "
                    f"{type(value).__name__}",
                    {**where, "field": name, "nativeKey": key, "decode": step},
                )
            value = STEPS[step](value)
        payload[name] = value
    for name in PRESENT.get(host, {}).get(event, ()):
        if name not in payload:  # a host that has the key must send it (hooks.toml unsent)
            raise errors.NativeDecodeFailed(
                f"{host} {native}: the {event} payload does not conform at the top: "
                f"missing required property {name!r}",
                where,
            )
    is_valid, first_error = PAYLOAD_CHECKS[event]
    while not is_valid(payload):
        path, message = first_error(payload)
        field = path.strip("/").split("/")[0]
        if field in payload and field not in required:
            del payload[field]
            left_out.append(field)
            continue
        raise errors.NativeDecodeFailed(
            f"{host} {native}: the {event} payload does not conform at "
            f"{path or 'the top'}: {message}",
            where,
        )
    return payload


def result_parts(result: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The hook_output parts one validated result is written with."""
    if result is None:
        return ("continue",)
    if result.get("outcome") == "deny":
        return ("deny",)
    parts = tuple(key for key in ("updatedInput", "additionalContext") if key in result)
    return parts or ("continue",)


def native_answer(
    host: str, event: str, native: str, result: Mapping[str, Any] | None
) -> tuple[bytes, tuple[str, ...]]:
    """(stdout bytes, result parts the host cannot carry) for one validated result, or for
    None, the plain continue. Empty bytes mean: write nothing."""
    rows = OUTPUTS[host][binding(host, event)[1]]
    values = {"$native": native}
    if result is not None:
        for key in ("reason", "updatedInput", "additionalContext"):
            if key in result:
                values["$" + key] = result[key]
    document: dict[str, Any] = {}
    dropped = []
    parts = result_parts(result)
    for part in parts:
        pairs = rows.get(part)
        if pairs is None:  # the host has no way to carry it: left out (spec check: never deny)
            dropped.append(part)
            continue
        for path, value in pairs:
            _put(document, path, values[value] if _placeholder(value) else value)
    if len(dropped) == len(parts) and parts != ("continue",):
        return native_answer(host, event, native, None)[0], tuple(dropped)
    if not document:
        # A host that shows a silent hook's stderr to the user wants an empty object instead.
        return EMPTY_ANSWERS.get(host, "").encode("utf-8"), tuple(dropped)
    text = json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n", tuple(dropped)


def _placeholder(value: object) -> bool:
    return isinstance(value, str) and value.startswith("$")


def _put(document: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    for key in path[:-1]:
        document = document.setdefault(key, {})
    document[path[-1]] = value


class Trace:
    """The kernel events of one execution, as plain dicts shaped like EventTraceEvent.json:
    `_event_trace` builds the same shapes but needs pyrsistent, too heavy here."""

    __slots__ = ("_started", "events", "execution")

    def __init__(self, family: str, host: str, native: str) -> None:
        self.execution = {
            "event": family,
            "executionId": execution_id(),
            "host": host,
            "nativeEvent": native,
        }
        self.events: list[dict[str, Any]] = []
        self._started: float | None = None

    def _emit(self, kind: str, **extra: Any) -> float:
        at = max(time.monotonic() * 1000.0, self.events[-1]["at"] if self.events else 0.0)
        event = {
            "at": at,
            "execution": self.execution,
            "kind": kind,
            "phase": hook_io.FAILURE_PHASE,
            "sequence": len(self.events) + 1,
            **extra,
        }
        self.events.append(event)
        return at

    def start(self) -> None:
        self._started = self._emit("handler.start")

    def outcome(self, outcome: str) -> None:
        self._finish("handler.outcome", outcome=outcome)

    def failure(self, error: dict[str, str]) -> None:
        self._finish("failure", error=error)

    def _finish(self, kind: str, **extra: Any) -> None:
        if self.events and self.events[-1]["kind"] == "failure":
            return  # failure is terminal: nothing follows it
        event_at = self._emit(kind, **extra)
        if self._started is not None:
            self.events[-1]["durationMs"] = event_at - self._started
            self._started = None


def execution_id() -> str:
    """`ex_` and 16 random base36 characters, the shape `_event_trace` gives executionIds."""
    number = int.from_bytes(os.urandom(11), "big")
    digits = []
    for _ in range(16):
        number, digit = divmod(number, 36)
        digits.append(_ID_ALPHABET[digit])
    return "ex_" + "".join(digits)


def receipt(trace: Trace, *, started_at: float, session: str) -> dict[str, Any]:
    """The EventTraceReceipt of one wrapper run: metadata only, never a payload value beyond
    the session id the lineage names."""
    whole = int(started_at)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    body: dict[str, Any] = {
        "version": hook_io.RECEIPT_VERSION,
        "execution": trace.execution,
        "startedAt": f"{stamp}.{int((started_at - whole) * 1000):03d}Z",
        "events": trace.events,
        "host": trace.execution["host"],
        "lineage": {"axis": hook_io.LINEAGE_AXIS, "value": session},
    }
    host_session = os.environ.get(runtime.HOST_SESSION_VARIABLE)
    if host_session:
        body["sessionId"] = host_session
    return body


def summarize(error: BaseException) -> dict[str, str]:
    """`summarize_event_trace_error(error)` as plain data; imported here, on the failure path
    only (it loads pyrsistent)."""
    try:
        from bundle_contract._event_trace import summarize_event_trace_error

        return dict(summarize_event_trace_error(error))
    except Exception:
        return {"name": type(error).__name__, "message": "unprintable error"}


# --------------------------------------------------------------------------------------------
# The shell: stdin, the handler under its deadline, stdout, stderr, the receipt post


def run(
    bundle_root: str | os.PathLike[str],
    *,
    host: str,
    native: str,
    event: str,
    handler: str,
    timeout: float | None,
) -> int:
    """Answer one native hook call of `host` with `handler`; returns the exit status, 0.

    `bundle_root` is the artifact root (its `src/` holds the handler's module), `timeout` the
    hook's native timeout in seconds (None: the hook document declares none, limit
    hook-wrapper-timeout applies). Reads stdin, writes the native answer on stdout, at most
    one line on stderr per problem, and posts a receipt when a dev server is listening.
    """
    started = time.monotonic()
    started_at = time.time()
    root = os.fspath(bundle_root)
    total_ms = hook_io.DEFAULT_TIMEOUT_MS if timeout is None else float(timeout) * 1000.0
    margin_ms = min(hook_io.MARGIN_MS, total_ms / 2)
    deadline = started + (total_ms - margin_ms) / 1000.0
    post_end = started + (total_ms - margin_ms / 2) / 1000.0
    answer_fd = _hold_stdout()
    trace = Trace(FAMILIES.get(event, ""), host, native)
    session = ""
    answer = b""
    dropped: tuple[str, ...] = ()
    # One deadline for all the work up to the answer (theory of operation, step 2).
    deadline_guard = Deadline(handler, deadline, post_end)
    try:
        try:
            deadline_guard.arm()
            served = binding(host, event)[0]
            if served != native:
                raise errors.UnknownNativeEvent(
                    f"the wrapper was built for {native}; hosts.toml serves {event} with {served}",
                    {"host": host, "nativeEvent": native},
                )
            native_input = _read_native_input()
            if isinstance(native_input, dict):
                session = _session_of(host, event, native_input)
            left_out: list[str] = []
            payload = handler_payload(host, event, native_input, left_out)
            if left_out:
                _say(
                    f"bundle hook {handler} ({host} {native}): left out {', '.join(left_out)}:"
                    " a value of a shape the bundle does not read"
                )
            context = MappingProxyType(
                {
                    "nativeEvent": native,
                    "nativeInput": MappingProxyType(native_input),
                    "target": host,
                }
            )
            trace.start()
            returned = _call(root, handler, payload, context)
            deadline_guard.check()
            result = validate_hook_result(event, returned)
            answer, dropped = native_answer(host, event, native, result)
        finally:
            deadline_guard.disarm()
        trace.outcome(result["outcome"])
    except BaseException as exc:  # the policy: whatever went wrong, the hook continues
        trace.failure(summarize(exc))
        answer = _continue_answer(host, event, native)
        dropped = ()
        _say(f"bundle hook {handler} ({host} {native}): {_describe(exc)}; the hook continues")
    _answer(answer_fd, answer)
    for part in dropped:
        _say(f"bundle hook {handler} ({host} {native}): the host cannot carry {part}; left out")
    if trace.execution["event"]:
        _post(root, receipt(trace, started_at=started_at, session=session), post_end)
    _flush()
    return 0


def _session_of(host: str, event: str, native_input: dict[str, Any]) -> str:
    """The native session id, for the receipt's lineage even when decoding fails."""
    for name, key, _step in binding(host, event)[2]:
        if name == "sessionId":
            value = native_input.get(key)
            return value if isinstance(value, str) else ""
    return ""


def _read_native_input() -> Any:
    chunks = []
    size = 0
    while True:
        chunk = os.read(0, READ_CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > hook_io.NATIVE_INPUT_MAX_BYTES:
            raise errors.NativeDecodeFailed(
                f"the native input exceeds {hook_io.NATIVE_INPUT_MAX_BYTES} bytes", {}
            )
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks), parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise errors.NativeDecodeFailed(f"the native input is not JSON ({exc})", {}) from None


def _call(root: str, handler: str, payload: dict[str, Any], context: Mapping[str, Any]) -> Any:
    """Import the handler with the artifact's src/ first on sys.path, and call it."""
    src = os.path.join(root, runtime.ARTIFACT_SOURCES)
    if sys.path[:1] != [src]:
        sys.path.insert(0, src)
    module_name, _, attribute = handler.partition(":")
    return getattr(importlib.import_module(module_name), attribute)(payload, context)


class Deadline:
    """SIGALRM at the deadline raises HandlerTimeout; a second alarm at `hard_end`, should
    the handler swallow the first and run on, writes one line and ends the process (exit 0,
    no answer: the plain continue of every host)."""

    __slots__ = ("_previous", "deadline", "fired", "handler", "hard_end")

    def __init__(self, handler: str, deadline: float, hard_end: float) -> None:
        self.handler = handler
        self.deadline = deadline
        self.hard_end = hard_end
        self.fired = False
        self._previous: Any = None

    def arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise HandlerTimeout("no time was left for the handler")
        self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, left)

    def check(self) -> None:
        if self.fired:  # it caught the timeout and returned anyway: too late to count
            raise HandlerTimeout("the handler returned after its deadline")

    def disarm(self) -> None:
        if self._previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._previous = None

    def _on_alarm(self, signum: int, frame: object) -> None:
        if self.fired:
            _say(
                f"bundle hook {self.handler}: the handler ignored its deadline; the hook continues"
            )
            _flush()
            os._exit(0)
        self.fired = True
        signal.setitimer(signal.ITIMER_REAL, max(self.hard_end - time.monotonic(), 0.001))
        raise HandlerTimeout("the handler ran past its deadline")


def _continue_answer(host: str, event: str, native: str) -> bytes:
    try:
        return native_answer(host, event, native, None)[0]
    except Exception:
        return b""  # an unknown host or event: no output is the continue of every host


def _describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= STDERR_LINE_MAX else text[: STDERR_LINE_MAX - 1] + "\u2026"


def _hold_stdout() -> int | None:
    """Keep the host's stdout for the answer and point fd 1 at stderr meanwhile."""
    try:
        saved = os.dup(1)  # not inheritable: a handler's child cannot hold the host waiting
    except OSError:
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
        except OSError:
            pass
    return saved


def _answer(fd: int | None, data: bytes) -> None:
    """Write the answer and close the host's stdout, so it has the answer at once."""
    if fd is None:
        return
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the host stopped reading: nothing more to do for it
    try:
        os.close(fd)
    except OSError:  # already gone: the host sees end of file either way
        return


def _say(line: str) -> None:
    try:
        _flush()
        os.write(2, line.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass


def _post(root: str, body: dict[str, Any], post_end: float) -> None:
    """Post the receipt when a dev server may listen; `_receipt_wrapper` (socket) is imported
    only then, and the post is cut to what is left before `post_end`."""
    environ = os.environ
    variables = environ.get(runtime.RECEIPT_URL_VARIABLE) and environ.get(
        runtime.RECEIPT_TOKEN_VARIABLE
    )
    if not variables and not os.path.exists(os.path.join(root, runtime.DEV_LINK_PATH)):
        return
    left = min(post_end - time.monotonic(), runtime.WRAPPER_POST_MS / 1000.0)
    if left <= 0:
        return
    try:
        from bundle_contract._receipt_wrapper import post_receipt

        post_receipt(body, bundle_root=root, timeout=left)
    except Exception:
        pass  # observation never alters the hook
