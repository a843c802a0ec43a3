"""The scripted model's HTTP server: a WSGI app on a loopback port of its own, gevent-served.

Theory of operation:

- `ScriptedModelApp` is the WSGI app. Each request is routed to a dialect
  (`dialects.find`): a turn is decoded into the neutral form, answered by the script stepper
  (one at a time, under a lock) and encoded back, as one JSON body or as a whole
  `text/event-stream` body when the host asked for a stream; any other operation of a dialect
  (token counts, model lists) gets the dialect's answer. A request no dialect serves is a 404,
  with an Anthropic-style error body, and recorded like the rest so that what a host probes
  can be seen.
- Every request is recorded once answered: its serial (numbered in order of arrival), time,
  method, path and query, dialect and operation, the status answered, the raw JSON body, the
  decoded neutral request and the reply (the turn played or None, text, tool calls, and a note
  when a turn waits). Records are kept in memory (`requests`) and, given a path, appended to
  that JSONL file as they happen.
- The server is `bundle_server._http.shell.LoopbackShell`: 127.0.0.1 only, port 0 for a free
  port, gevent in a thread of its own. Requests must name that port's loopback Host and carry
  no Origin (a web page is never a model client): otherwise a 403. A body is at most
  `MAX_BODY` bytes; gzip-encoded bodies are accepted.
"""

from __future__ import annotations

import json
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from bundle_contract._spec import get_spec
from bundle_server._http.shell import LoopbackShell
from bundle_server.model.dialects import find
from bundle_server.model.script import ScriptStepper

StartResponse = Callable[..., Any]
MAX_BODY: int = get_spec().limit("model-request-bytes")["maximum"]
COMMON = [("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")]


class _Refused(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _headers(environ: Mapping[str, Any]) -> dict[str, str]:
    found = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            found[key.replace("_", "-").lower()] = str(environ[key])
    return found


def _body(environ: Mapping[str, Any], headers: Mapping[str, str]) -> bytes:
    try:
        length = int(headers.get("content-length") or 0)
    except ValueError:
        length = -1
    if length < 0:
        raise _Refused("400 Bad Request", "a Content-Length that is not a number") from None
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    if length > MAX_BODY and not chunked:
        raise _Refused("413 Content Too Large", f"a body above {MAX_BODY} bytes")
    # A chunked body is read to its end, or to one byte past the bound.
    raw: bytes = environ["wsgi.input"].read(MAX_BODY + 1 if chunked else length)
    if len(raw) > MAX_BODY:
        raise _Refused("413 Content Too Large", f"a body above {MAX_BODY} bytes")
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding == "gzip":
        inflate = zlib.decompressobj(wbits=31)  # a gzip header and trailer
        try:
            data = inflate.decompress(raw, MAX_BODY + 1)
        except zlib.error:
            raise _Refused("400 Bad Request", "a gzip body that does not decompress") from None
        if len(data) > MAX_BODY:
            raise _Refused("413 Content Too Large", f"a body above {MAX_BODY} bytes")
        return data
    if encoding not in ("", "identity"):
        raise _Refused("415 Unsupported Media Type", f"the content encoding {encoding!r}")
    return raw


class ScriptedModelApp:
    """The WSGI app of the scripted model (see the module docstring)."""

    def __init__(
        self, stepper: ScriptStepper, record: str | os.PathLike[str] | None = None
    ) -> None:
        self.stepper = stepper
        self.port = 0  # set by the server once bound: the Host names it admits
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._serial = 0
        self._record = None if record is None else Path(record)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far, in the order answered (a copy of the list)."""
        with self._lock:
            return list(self._records)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET"))
        path = str(environ.get("PATH_INFO", ""))
        headers = _headers(environ)
        with self._lock:
            self._serial += 1
            record: dict[str, Any] = {"serial": self._serial}
        record.update(
            {
                "time": time.time(),
                "method": method,
                "path": path,
                "query": {
                    k: v[-1] for k, v in parse_qs(str(environ.get("QUERY_STRING", ""))).items()
                },
            }
        )
        extra: list[tuple[str, str]] = []
        try:
            status, media, body = self._answer(method, path, headers, environ, record)
        except _Refused as refused:
            status, media = refused.status, "application/json"
            error = {
                "type": "error",
                "error": {"type": "scripted_model", "message": refused.message},
            }
            body = json.dumps(error).encode()
            # The body may be unread: the connection ends rather than read past it.
            extra = [("Connection", "close")]
        record["status"] = int(status.split(" ", 1)[0])
        self._keep(record)
        head = [*COMMON, ("Content-Type", media), ("Content-Length", str(len(body))), *extra]
        start_response(status, head)
        return [body]

    def _answer(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        environ: Mapping[str, Any],
        record: dict[str, Any],
    ) -> tuple[str, str, bytes]:
        loopback = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        if "origin" in headers or headers.get("host") not in loopback:
            raise _Refused("403 Forbidden", "a loopback Host of this port, and no Origin")
        raw = _body(environ, headers)
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            raise _Refused("400 Bad Request", "a body that is not JSON") from None
        record["raw"] = data
        found = find(method, path, headers)
        if found is None:
            raise _Refused("404 Not Found", f"the scripted model does not serve {method} {path}")
        dialect, operation = found
        record.update(dialect=dialect.name, operation=operation.name)
        if not isinstance(data, dict):
            raise _Refused("400 Bad Request", "a body that is not a JSON object")
        if operation.name != "turn":
            return "200 OK", "application/json", json.dumps(dialect.other(operation, data)).encode()
        try:
            request = dialect.decode(operation, data)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            message = f"a {dialect.name} request of a shape not read here: {error!r}"
            raise _Refused("400 Bad Request", message) from None
        with self._lock:
            reply = self.stepper.answer(request)
        serial = int(record["serial"])
        record.update(request=request.to_json(), reply=reply.to_json())
        if request.stream:
            return "200 OK", "text/event-stream", b"".join(dialect.stream(request, reply, serial))
        return (
            "200 OK",
            "application/json",
            json.dumps(dialect.reply(request, reply, serial)).encode(),
        )

    def _keep(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._records.append(record)
            if self._record is not None:
                with self._record.open("a", encoding="utf-8") as file:
                    file.write(json.dumps(record, sort_keys=True) + "\n")


class ScriptedModelServer:
    """The app served on 127.0.0.1 (`port` 0: a free one); `url` has no trailing slash."""

    def __init__(self, app: ScriptedModelApp, port: int = 0) -> None:
        self.app = app
        self._shell = LoopbackShell("127.0.0.1", port)
        self.port = app.port = self._shell.port
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._shell.start(self.app)

    def stop(self) -> None:
        self._shell.stop()
