"""A one-purpose receipt endpoint on loopback: the evidence that a hook's handler really ran.

The hook wrapper posts its payload-free receipt (handler.start, then handler.outcome or
failure) to the URL and token in the receipt variables (runtime.toml) when both are set; doctor
sets them to this endpoint for each hook it runs, so what the wrapper did is read from what it
said, not guessed from its silence (a wrapper fails open: exit 0, nothing on stdout).
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bundle_contract._generated import runtime
from bundle_contract._spec import get_spec

IO_SECONDS = get_spec().limit("socket-io-timeout")["maximum"] / 1000


class ReceiptInbox:
    """A loopback HTTP endpoint keeping the receipts posted to it, until `close()`."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._receipts: list[dict[str, Any]] = []
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            timeout = IO_SECONDS  # a client that stops sending ends its connection

            def do_POST(self) -> None:
                given = self.headers.get("Content-Length") or ""
                length = int(given) if given.isdigit() else -1
                presented = (self.headers.get("Authorization") or "").encode("utf-8", "replace")
                authorized = hmac.compare_digest(presented, f"Bearer {inbox.token}".encode())
                if not 0 <= length <= runtime.RECEIPT_BODY_MAX_BYTES:
                    self.send_response(400)
                    self.close_connection = True
                elif self.path != runtime.RECEIPT_ROUTE_PATH or not authorized:
                    self.send_response(401)
                    self.close_connection = True
                else:
                    try:
                        received = json.loads(self.rfile.read(length))
                    except ValueError:
                        received = None
                    if isinstance(received, dict):
                        with inbox._lock:
                            inbox._receipts.append(received)
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the evidence is the receipts, not an access log

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def variables(self) -> dict[str, str]:
        """The receipt variables that point a wrapper here."""
        port = self._server.server_address[1]
        return {
            runtime.RECEIPT_URL_VARIABLE: f"http://127.0.0.1:{port}{runtime.RECEIPT_ROUTE_PATH}",
            runtime.RECEIPT_TOKEN_VARIABLE: self.token,
        }

    def renew(self) -> dict[str, str]:
        """A new token, so that a receipt still on its way from an earlier hook is refused:
        the receipt variables that point a wrapper here with it."""
        with self._lock:
            self.token = secrets.token_urlsafe(24)
            self._receipts = []
        return self.variables

    def take(self) -> list[dict[str, Any]]:
        """The receipts posted since the last take."""
        with self._lock:
            taken, self._receipts = self._receipts, []
        return taken

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that broke its request gets nothing; doctor's output stays its report
