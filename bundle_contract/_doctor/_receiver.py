"""A one-purpose receipt endpoint on loopback: the evidence that a hook's handler really ran.

The hook wrapper posts its payload-free receipt (handler.start, then handler.outcome or
failure) to the URL and token in the receipt variables (runtime.toml) when both are set; doctor
sets them to this endpoint for each hook it runs, so what the wrapper did is read from what it
said, not guessed from its silence (a wrapper fails open: exit 0, nothing on stdout).
"""

from __future__ import annotations

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bundle_contract._generated import runtime


class ReceiptInbox:
    """A loopback HTTP endpoint keeping the receipts posted to it, until `close()`."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._receipts: list[dict[str, Any]] = []
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, runtime.RECEIPT_BODY_MAX_BYTES))
                authorized = self.headers.get("Authorization") == f"Bearer {inbox.token}"
                if self.path != runtime.RECEIPT_ROUTE_PATH or not authorized:
                    self.send_response(401)
                else:
                    try:
                        received = json.loads(body)
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

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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

    def take(self) -> list[dict[str, Any]]:
        """The receipts posted since the last take."""
        with self._lock:
            taken, self._receipts = self._receipts, []
        return taken

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
