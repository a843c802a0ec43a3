"""Tiny artifact-like trees with generated hook wrappers, and a receipt listener, for tests.

An artifact root R holds `src/handlers.py` (the handlers below) and, per host kind,
`hosts/<host>/` with wrappers at `hooks/<NativeEvent>` (written by `wrapper_source`, mode 0755)
and the documents of `plugin_files`; the plugin reaches the handlers through its own `src`
(hard links to R/src's files, so a test may still edit them there). Wrappers run as real
subprocesses, as a host runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bundle_contract._generated import runtime
from bundle_contract._host_plugin import plugin_files, wrapper_source
from bundle_contract._spec import get_spec

HANDLERS = '''
import json
import os
import sys
import time


def deny_bash(payload, context):
    if payload["toolName"] == "Bash":
        return {"outcome": "deny", "reason": "no shell: " + payload["toolInput"]["command"][:2]}
    return None


def rewrite(payload, context):
    if payload["toolName"] == "Bash":
        return {"outcome": "deny", "reason": "no shell here"}
    return {"updatedInput": {**payload["toolInput"], "rewritten": True}}


def greet(payload, context):
    return {"additionalContext": "hello from " + context["target"] + " " + payload["source"]}


def after(payload, context):
    return {"additionalContext": "seen " + payload["toolName"] + " in " + context["nativeEvent"]}


def block_stop(payload, context):
    if payload["stopHookActive"]:
        return None
    return {"outcome": "deny", "reason": "write the tests first"}


def allow(payload, context):
    return None


def record(payload, context):
    """Writes what it was given (and the modules loaded) to $RECORD_FILE."""
    try:
        context["target"] = "changed"
        writable = True
    except TypeError:
        writable = False
    with open(os.environ["RECORD_FILE"], "w") as handle:
        json.dump({
            "payload": payload,
            "nativeEvent": context["nativeEvent"],
            "nativeInput": dict(context["nativeInput"]),
            "target": context["target"],
            "contextWritable": writable,
            "modules": sorted(sys.modules),
            "path0": sys.path[0],
        }, handle)
    return None


def chatty(payload, context):
    print("a stray line on stdout")
    return {"outcome": "deny", "reason": "still a clean answer"}


def raises(payload, context):
    raise RuntimeError("the handler broke")


def hangs(payload, context):
    time.sleep(60)


def swallows(payload, context):
    # Catches even the wrapper's timeout and keeps going: only the hard stop ends it.
    while True:
        try:
            time.sleep(60)
        except BaseException:
            pass


def deny_anything(payload, context):
    return {"outcome": "deny", "reason": "never legal on sessionStart"}


def stop_outcome(payload, context):
    return {"outcome": "stop"}


def not_an_object(payload, context):
    return ["continue"]
'''

# A realistic native input per host kind and native event.
SESSION = "sess-7f3a"
TOOL_INPUT = {"command": "ls -la /home/someone/secret-project"}


def native_input(host: str, native: str, **extra: Any) -> dict[str, Any]:
    """A native input of `host` for `native`, built from hosts.toml like a real host's."""
    row = next(h for h in get_spec().rows("hosts", "host") if h["kind"] == host)
    event = next(e for e in row["event"] if e["native"] == native)
    values: dict[str, Any] = {
        "sessionId": SESSION,
        "cwd": "/work/project",
        "transcriptPath": "/work/project/.transcript.jsonl",
        "permissionMode": "default",
        "model": "model-1",
        "source": "startup",
        "toolName": "Bash",
        "toolInput": TOOL_INPUT,
        "toolUseId": "toolu_01",
        "toolResponse": {"stdout": "total 0"},
        "reentry": False,
        "lastAssistantMessage": "done",
        "workspaceRoots": ["/work/project"],
    }
    keys = {k: v for k, v in row["common_keys"].items() if k not in event.get("omit", ())}
    keys.update(event.get("keys", {}))
    decode = event.get("decode", {})
    payload: dict[str, Any] = {}
    for field, key in keys.items():
        if field in values:
            value = values[field]
            if decode.get(field) == "json-string":
                value = json.dumps(value)
            elif decode.get(field) == "positive-count":
                value = int(value)
            payload[key] = value
    for field, key in row.get("payload_keys", {}).items():
        value: Any = native if field == "hookEventName" else f"{field}-1"
        if row.get("payload_decode", {}).get(field) == "level":
            value = {"level": value}  # as Claude sends effort
        payload[key] = value
    payload.update(extra)
    return payload


def native_event(host: str, event: str) -> str:
    spec = get_spec()
    family = next(e["family"] for e in spec.rows("hooks", "event") if e["name"] == event)
    row = next(h for h in spec.rows("hosts", "host") if h["kind"] == host)
    native: str = next(e["native"] for e in row["event"] if e["family"] == family)
    return native


def make_root(base: Path) -> Path:
    root = base / "R"
    (root / "src").mkdir(parents=True)
    (root / "src" / "handlers.py").write_text(HANDLERS, encoding="utf-8")
    return root


def add_wrapper(
    root: Path,
    host: str,
    event: str,
    handler: str,
    *,
    timeout: float | None = 10,
    python: str = sys.executable,
) -> Path:
    """Write the wrapper of `handler` for `event` at hosts/<host>/hooks/<NativeEvent>."""
    native = native_event(host, event)
    path = root / "hosts" / host / "hooks" / native
    path.parent.mkdir(parents=True, exist_ok=True)
    source = root / "hosts" / host / runtime.ARTIFACT_SOURCES
    if not source.exists():  # hard links: the same files, and a copy of the plugin is whole
        shutil.copytree(root / runtime.ARTIFACT_SOURCES, source, copy_function=os.link)
    path.write_text(
        wrapper_source(
            python=python,
            host=host,
            native=native,
            event=event,
            handler=f"handlers:{handler}",
            timeout=timeout,
            root_from_wrapper="..",
        ),
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def add_plugin(
    root: Path, host: str, handlers: Mapping[str, str], *, timeout: float | None = 10
) -> Path:
    """Wrappers for `handlers` (handler event -> handler name) plus the plugin documents."""
    hooks: list[tuple[str, str, float | None]] = []
    for event, handler in handlers.items():
        wrapper = add_wrapper(root, host, event, handler, timeout=timeout)
        hooks.append((wrapper.name, f"hooks/{wrapper.name}", timeout))
    plugin = root / "hosts" / host
    application = {"id": "demo-bundle", "name": "Demo", "version": "0.1.0"}
    for relative, data in plugin_files(
        host, application=application, hooks=hooks, mcp_servers={}
    ).items():
        (plugin / relative).parent.mkdir(parents=True, exist_ok=True)
        (plugin / relative).write_bytes(data)
    return plugin


def call(
    wrapper: Path, stdin: bytes | Mapping[str, Any], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run a wrapper as a host does: spawned directly, native JSON on stdin."""
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    return subprocess.run(
        [str(wrapper)],
        input=data,
        capture_output=True,
        env=dict(os.environ if env is None else env),
        timeout=30,
        check=False,
    )


class Receiver(ThreadingHTTPServer):
    """A receipt route stand-in on 127.0.0.1: records bodies, answers 204."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[bytes] = []
        self.authorizations: list[str] = []
        self.arrived = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{runtime.RECEIPT_ROUTE_PATH}"

    def environment(self, token: str = "test-token_0123") -> dict[str, str]:
        """The two receipt variables (spec/runtime.toml) pointing at this listener."""
        return {runtime.RECEIPT_URL_VARIABLE: self.url, runtime.RECEIPT_TOKEN_VARIABLE: token}

    def receipts(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in self.bodies]


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.bodies.append(body)
        self.server.authorizations.append(self.headers.get("Authorization", ""))
        self.send_response(204)
        self.end_headers()
        self.server.arrived.set()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def start_receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def clean_environ(
    extra: Mapping[str, str] | None = None, drop: Sequence[str] = ()
) -> dict[str, str]:
    """os.environ without the receipt and session variables, plus `extra`."""
    names = {
        runtime.RECEIPT_URL_VARIABLE,
        runtime.RECEIPT_TOKEN_VARIABLE,
        runtime.HOST_SESSION_VARIABLE,
        runtime.PLUGIN_ROOT_VARIABLE,
        *drop,
    }
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(extra or {})
    return env
