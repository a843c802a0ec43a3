"""The process a bundle's routes run in: `python -P -m bundle_contract._route_worker ROOT
--requests FD --replies FD`, started by the development server, never inside it.

Theory of operation:

- ROOT is an artifact epoch (`src/` holds the project's modules). The worker puts `src/` first
  on sys.path once, and then runs jobs, one at a time, for as long as it lives: the `shared`
  runtime keeps one warm worker per epoch, `standalone` starts one per run.
- Jobs and replies are NDJSON lines on two pipes of their own (`--requests`, `--replies`), not
  on stdin/stdout: route code that prints, reads stdin or closes fd 1 cannot corrupt the
  protocol. The server collects stdout and stderr as the run's diagnostics.
- A job: `{"op": "run", "id", "handler": "module:function", "providers": [...], "event",
  "input", "args", "fixture"?}`. With `fixture` (`{"module": project-relative path, "id",
  "target"?}`, the project's `dev.contracts.fixtures`), the event is the fixture's native
  payload through the canonical decoder, exactly as at hook time: the module's `FIXTURES`
  maps a fixture id to `{"host", "event" (the native event), "payload"}` (`target` picks the
  host of the fixture instead of its own `host`). The module is project code, so it is
  loaded here, in the worker; an unknown id or a payload that does not decode fails the run.
  The worker calls each provider as `provider(event, context)` (its value
  keyed by the provider's reference), then `handler(event, context)`. `context.render(kind,
  data=None, document=None)` sends a render event at once (`document` makes it
  document-bearing, and the newest document is the run's Agent Document); `context.input`,
  `context.args`, `context.providers` and `context.invocation_id` are the run's.
- `{"op": "warm", "id", "references": [...], "fixtures"?: module}` imports what the epoch's
  routes name (a runtime generation compiling) and answers one final reply, completed (with
  the fixtures module's `fixtures`: id, host, native event, and the family each decodes to)
  or failed. A job's `host` (a runtime run's target) is the host kind of an event that has no
  fixture.
- Replies: `{"id", "type": "trace", "kind", "phase", "at", ...}` for the kernel events of the
  event tracer's vocabulary (execute, providers, render, failure), `{"id", "type": "render",
  "kind", "data", "document"?}` per render event, and one `{"id", "type": "final", "status":
  "completed" | "failed", "result", "document", "providers", "outcome"?, "error"?}`.
- Outcome: `deny` when the result is a mapping whose `decision` is "deny" (the hook results'
  word), else `render` when the run produced an Agent Document, else `continue`.
- What the worker cannot survive (a crash, `os._exit`, a hang past the server's bound, a
  cancel) ends the process; the server answers for the run and starts another worker. An
  allocation past the address-space bound the server sets raises MemoryError in the route,
  which is an ordinary failed run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import resource
import select
import subprocess
import sys
import time
import traceback
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

# How often an idle worker reaps its children (see `requests`).
REAP_SECONDS = 0.02


class RouteContext:
    """What a route's handler and providers receive besides the event."""

    def __init__(self, job: Mapping[str, Any], replies: Replies) -> None:
        self.invocation_id: str = job["id"]
        self.input: Any = job.get("input")
        self.args: Any = job.get("args")
        self.providers: dict[str, Any] = {}
        self.document: Any = None
        self._replies = replies
        # The largest render event the server keeps (limit render-event-budget, sent with the
        # job); a job without it (an older server) has no bound here, the server's still holds.
        bound = job.get("renderEventBytes")
        self._event_bytes: float = bound if isinstance(bound, int) else float("inf")

    def render(self, kind: str, data: Any = None, document: Any = None) -> None:
        """Send one render event now; with `document`, it bears the run's Agent Document."""
        if not isinstance(kind, str) or not kind:
            raise ValueError("a render event needs a non-empty kind")
        event: dict[str, Any] = {"kind": kind, "data": data}
        if document is not None:
            event["document"] = document
        # The event's serialized size (RenderEvent `bytes`, what the window counts), measured
        # here where it is encoded anyway, so the server does not encode it again. What is not
        # JSON (NaN, Infinity, a set) fails here, in the route's code, with where it is.
        size = len(encoded(event, f"render event {kind!r}").encode())
        if size > self._event_bytes:
            # Refused before it reaches the pipe: the server would refuse it anyway (limit
            # render-event-budget), and the route learns why where it rendered.
            raise RenderEventTooLarge(
                f"render event {kind!r} is {size} bytes encoded, above the limit of"
                f" {self._event_bytes} bytes (render-event-budget)"
            )
        if document is not None:
            self.document = document
        self._replies.send(self.invocation_id, {"type": "render", "bytes": size, **event})


class RenderEventTooLarge(ValueError):
    """A render event above the server's per-event bound (render-event-budget)."""


class NotJson(ValueError):
    """A value a route handed over (a render event, its result) that JSON cannot carry."""


def encoded(value: Any, what: str) -> str:
    """`value` as compact JSON, or NotJson naming `what` and the path of the first value JSON
    cannot carry (NaN and Infinity included: they are not JSON, whatever Python writes)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise NotJson(f"{what} is not JSON: {_not_json_at(value, '$') or error}") from None


def _not_json_at(value: Any, path: str, depth: int = 0) -> str | None:
    """Where the first value JSON cannot carry sits in `value` (only called after a failure,
    so the walk costs nothing on the happy path)."""
    if depth > 100:
        return f"{path}: nested too deeply"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"{path} is {value!r} (NaN and Infinity are not JSON numbers)"
    if value is None or isinstance(value, (str, int, float, bool)):
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _not_json_at(item, f"{path}[{index}]", depth + 1)
            if found:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int, bool)) and key is not None:
                if isinstance(key, float) and key == key and abs(key) != float("inf"):
                    continue
                return f"{path} has the key {key!r}, which is not a JSON object key"
            found = _not_json_at(item, f"{path}.{key}", depth + 1)
            if found:
                return found
        return None
    return f"{path} is a {type(value).__name__}, which is not a JSON value"


class Replies:
    """The reply pipe: one compact JSON line per message, flushed at once."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._began = time.monotonic()

    def send(self, invocation_id: str, message: dict[str, Any]) -> None:
        line = json.dumps(
            {"id": invocation_id, **message},
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
        )
        self._stream.write(line + "\n")
        self._stream.flush()

    def trace(self, invocation_id: str, kind: str, phase: str, **extra: Any) -> None:
        at = round((time.monotonic() - self._began) * 1000, 3)
        self.send(invocation_id, {"type": "trace", "kind": kind, "phase": phase, "at": at, **extra})


def resolve(reference: str) -> Any:
    module_name, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


class FixtureUnknown(LookupError):
    """The project's fixtures module has no fixture of that id (or no module at all)."""


def load_fixtures(module_path: str) -> Mapping[Any, Any]:
    """The `FIXTURES` of the project's fixtures module (project-relative), loaded fresh."""
    if not module_path:
        raise FixtureUnknown("the project names no fixtures module (dev.contracts.fixtures)")
    path = os.path.join(sys.path[0], module_path)
    if not os.path.isfile(path):
        raise FixtureUnknown(f"the fixtures module {module_path} does not exist")
    spec = importlib.util.spec_from_file_location("bundle_fixtures", path)
    if spec is None or spec.loader is None:
        raise FixtureUnknown(f"{module_path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fixtures = getattr(module, "FIXTURES", {})
    if not isinstance(fixtures, Mapping):
        raise FixtureUnknown(f"{module_path}: FIXTURES is not a mapping of fixture ids")
    return fixtures


def fixture_event(fixture: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical event of a project fixture (see the module docstring)."""
    from bundle_contract._canonical import decode_native

    fixtures = load_fixtures(fixture["module"])
    found = fixtures.get(fixture["id"])
    if not isinstance(found, Mapping):
        known = ", ".join(sorted(map(str, fixtures)))
        raise FixtureUnknown(
            f"{fixture['module']} has no fixture {fixture['id']!r} (it has: {known or 'none'})"
        )
    host = fixture.get("target") or found.get("host")
    event = decode_native(str(host), str(found.get("event")), found.get("payload", {}))
    return event.to_json()


def list_fixtures(module_path: str) -> list[dict[str, str]]:
    """What a client can pick from: each fixture's id, host and native event, and the family
    it decodes to (or why it does not). Empty without a fixtures module."""
    from bundle_contract._canonical import decode_native

    if not module_path:
        return []
    listed = []
    for key, found in load_fixtures(module_path).items():
        found = found if isinstance(found, Mapping) else {}
        row = {
            "id": str(key),
            "host": str(found.get("host")),
            "nativeEvent": str(found.get("event")),
        }
        try:
            event = decode_native(row["host"], row["nativeEvent"], found.get("payload", {}))
        except Exception as error:  # a fixture that does not decode is listed with why
            row["error"] = str(error)[:500]
        else:
            row["family"] = event.family
        listed.append(row)
    return sorted(listed, key=lambda row: row["id"])


def summarize(error: BaseException) -> dict[str, str]:
    return {"name": type(error).__name__, "message": str(error)[:2000]}


def outcome_of(result: Any, document: Any) -> str:
    if isinstance(result, Mapping) and result.get("decision") == "deny":
        return "deny"
    return "render" if document is not None else "continue"


def run(job: Mapping[str, Any], replies: Replies, runtime: str) -> dict[str, Any]:
    """Run one job, sending its trace and render replies; its final reply (not yet sent)."""
    invocation = job["id"]
    context = RouteContext(job, replies)
    phase = "execute"
    started = time.monotonic()
    replies.trace(invocation, "execute.start", "execute", runtime=runtime)
    try:
        if job.get("fixture"):
            job = {**job, "event": fixture_event(job["fixture"])}
        elif job.get("host"):  # no fixture: the bare event, seen as that host kind's
            job = {**job, "event": {**job["event"], "host": job["host"]}}
        phase = "providers"
        replies.trace(invocation, "providers.start", "providers")
        for reference in job.get("providers", []):
            context.providers[reference] = resolve(reference)(job["event"], context)
        replies.trace(invocation, "providers.finish", "providers", count=len(context.providers))
        phase = "render"
        replies.trace(invocation, "render.start", "render")
        result = resolve(job["handler"])(job["event"], context)
        # What is not JSON fails the run here, not the reply pipe.
        encoded(result, "the route's result")
        encoded(context.document, "the route's Agent Document")
        replies.trace(invocation, "render.finish", "render")
    except BaseException as error:  # the run fails; the worker lives on (SystemExit too)
        if isinstance(error, KeyboardInterrupt):
            raise
        replies.trace(invocation, "failure", phase, error=summarize(error))
        traceback.print_exc(file=sys.stderr)
        return {
            "type": "final",
            "status": "failed",
            "error": summarize(error),
            "providers": _jsonable(context.providers),
            "document": _jsonable(context.document),
            "durationMs": round((time.monotonic() - started) * 1000, 3),
        }
    return {
        "type": "final",
        "status": "completed",
        "host": job["event"].get("host"),
        "result": result,
        "document": context.document,
        "providers": _jsonable(context.providers),
        "outcome": outcome_of(result, context.document),
        "durationMs": round((time.monotonic() - started) * 1000, 3),
    }


def warm(job: Mapping[str, Any]) -> dict[str, Any]:
    """Import every module the epoch's routes name (a runtime generation compiling): its final
    reply says whether they all import."""
    try:
        for reference in job.get("references", []):
            resolve(reference)
    except BaseException as error:  # an import error is the generation's failure
        if isinstance(error, KeyboardInterrupt):
            raise
        traceback.print_exc(file=sys.stderr)
        return {"type": "final", "status": "failed", "error": summarize(error)}
    try:
        fixtures = list_fixtures(job.get("fixtures", ""))
    except BaseException as error:  # a broken fixtures module fails runs that name one only
        if isinstance(error, KeyboardInterrupt):
            raise
        traceback.print_exc(file=sys.stderr)
        return {
            "type": "final",
            "status": "completed",
            "fixtures": [],
            "fixturesError": summarize(error),
        }
    return {"type": "final", "status": "completed", "fixtures": fixtures}


# Written to fd 1 after a job's output, before its final reply: the server's reader of the
# output knows it has every line the job printed (the two pipes are read by two threads).
OUTPUT_END = "\x00route-output-end "


def end_output(invocation: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # route code may have replaced or closed them
            stream.flush()
    with contextlib.suppress(OSError):
        # On a line of its own, even after output that did not end with one.
        os.write(1, f"\n{OUTPUT_END}{invocation}\n".encode())


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)[:2000]
    return value


def requests(fd: int) -> Iterator[bytes]:
    """The request lines on `fd`. While it waits for one (no job runs), the worker reaps its
    zombie children: when a run ends, the server kills what the route started (its process
    unit, but the worker), and a direct child of the worker that the route never waited for
    would otherwise stay a zombie for as long as the worker lives."""
    pending = b""
    while True:
        while b"\n" not in pending:
            ready, _, _ = select.select([fd], [], [], REAP_SECONDS)
            if not ready:
                reap_children()
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            pending += chunk
        line, _, pending = pending.partition(b"\n")
        yield line


# Route code may still hold a child between jobs (a thread of a warm worker, a module-level
# Popen): reaping it here would take its exit status, and its Popen.wait() would say 0. So
# the idle reaper spares every child a live Popen holds. Every Popen made in this process is
# recorded (`hold_popens`): a weak set, so one that route code dropped is no longer held.
# Not covered: a child forked by other means (os.fork, multiprocessing) that route code waits
# for itself from a thread that outlives its job; a dead child is reaped only while idle.
_popens: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()
# One token per Popen being made now: its child exists (and may have exited) before the
# Popen is in _popens. list.append and list.remove are atomic: no lock (a lock held by one
# thread while another forks would be held forever in the forked child).
_starting: list[object] = []


def hold_popens() -> None:
    """Record every Popen made from now on in _popens (its class's __init__, subclasses'
    too, asyncio's included)."""
    made = subprocess.Popen.__init__
    if getattr(made, "holds", False):
        return

    def __init__(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        token = object()
        _starting.append(token)
        try:
            made(self, *args, **kwargs)
            _popens.add(self)
        finally:
            _starting.remove(token)

    __init__.holds = True  # type: ignore[attr-defined]
    subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]


def reap_children() -> None:
    """Reap the worker's dead children that no live Popen holds (see _popens)."""
    try:
        # The common case, one syscall: no child has exited. WNOWAIT: only a look.
        if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return
    except ChildProcessError:
        return
    found = children()
    # Checked after listing: a child listed was forked before, so its Popen is either still
    # being made (a token) or in _popens already.
    if _starting:
        return  # the next idle round reaps
    try:
        popens = list(_popens)
    except RuntimeError:  # a thread added one meanwhile: the next idle round reaps
        return
    # A Popen dropped while its child ran is kept in subprocess._active (by its __del__) for
    # subprocess to reap later: nobody waits for it, so it is not held.
    dropped = {id(popen) for popen in list(getattr(subprocess, "_active", None) or [])}
    held = {p.pid for p in popens if p.returncode is None and id(p) not in dropped}
    for pid in found:
        if pid not in held:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # a child still running is left alone


def children() -> list[int]:
    """The worker's child processes, zombies included: /proc/self/task/*/children (a child
    is its forking thread's), else, without CONFIG_PROC_CHILDREN, a scan of /proc."""
    own = os.getpid()
    tasks = f"/proc/{own}/task"
    found: list[int] = []
    if os.path.exists(f"{tasks}/{own}/children"):
        for task in os.listdir(tasks):
            with contextlib.suppress(OSError), open(f"{tasks}/{task}/children") as handle:
                found.extend(int(pid) for pid in handle.read().split())
        return found
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{name}/stat", "rb") as handle:
                raw = handle.read()
            if int(raw[raw.rfind(b")") + 2 :].split()[1]) == own:
                found.append(int(name))
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bundle_contract._route_worker")
    parser.add_argument("root")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--replies", type=int, required=True)
    parser.add_argument("--runtime", choices=("shared", "standalone"), default="shared")
    parser.add_argument("--memory", type=int, help="address-space bound in bytes")
    args = parser.parse_args(argv)
    if args.memory:
        # Set here, not by the server before exec: a pre-exec hook in a threaded server can
        # deadlock. Past it, an allocation raises MemoryError in the route: a failed run.
        resource.setrlimit(resource.RLIMIT_AS, (args.memory, args.memory))
    sys.path.insert(0, os.path.join(args.root, "src"))
    hold_popens()  # before any route code: see _popens
    replies = Replies(os.fdopen(args.replies, "w", encoding="utf-8"))
    for line in requests(args.requests):
        job = json.loads(line)
        if job.get("op") == "warm":
            final = warm(job)
        elif job.get("op") == "run":
            final = run(job, replies, args.runtime)
        else:
            break
        end_output(job["id"])
        try:
            replies.send(job["id"], final)
        except (TypeError, ValueError) as error:
            # A final reply JSON cannot carry must not end the worker (the server would only
            # say it exited): the run fails with why.
            replies.send(
                job["id"], {"type": "final", "status": "failed", "error": summarize(error)}
            )


if __name__ == "__main__":
    main()
