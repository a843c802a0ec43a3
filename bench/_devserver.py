"""The development server as the benches use it: `python -m bundle_server PROJECT` in a process
of its own on a free port, and one keep-alive connection to its API."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class DevServerProcess:
    """The server on `project`, its state under `state`; `request` speaks JSON to it."""

    def __init__(self, project: Path, state: Path) -> None:
        ready = state / "ready.json"
        env = {**os.environ, "BUNDLE_STATE_ROOT": str(state)}
        command = [sys.executable, "-m", "bundle_server", str(project), "--port", "0"]
        self.process = subprocess.Popen(
            [*command, "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 60
        while not ready.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.process.kill()
                self.process.wait(30)
                raise SystemExit("FAILED: the server did not start")
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        self.port = int(info["url"].rsplit(":", 1)[1])
        self.token = info["session"]
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Host": f"127.0.0.1:{self.port}", "x-bundle-session": self.token}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body)
        self.conn.request(method, path, data, headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read())

    def close(self) -> None:
        self.conn.close()
        self.process.terminate()
        self.process.wait(30)
