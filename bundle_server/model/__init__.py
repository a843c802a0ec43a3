"""The scripted model: a loopback server of ours speaking the model APIs of the real hosts.

Run a real coding agent (Claude Code, Codex CLI, Gemini CLI) against a script instead of a
model: deterministic, free, without credentials, and every request the host makes recorded.

    from bundle_server.model import start_scripted_model

    script = {"turns": [{"toolCalls": [{"shell": "touch marker.txt"}]},
                        {"when": {"toolResult": True}, "text": "Created marker.txt."}]}
    with start_scripted_model(script, record="requests.jsonl") as model:
        ...  # point the host at model.url (Codex: model.url + "/v1"), run it
        model.requests  # every request: method, path, raw JSON, neutral form, reply

    python -m bundle_server.model SCRIPT.json [--port N] [--record FILE]

Pointing a host at it (any API key will do): spec/hosts.toml says how, per host, in its
`[host.scripted]` row (variables, arguments, settings merged into the run's own home) and the
`[scripted]` table (proxies naming a closed loopback port, so nothing leaves loopback);
`bundle_contract.attach_plan(..., model_url=model.url)` turns them into a run's plan, which
`bundle-server --model-script` and `bundle-evals run --model scripted` apply. In short:

- Claude Code: `ANTHROPIC_BASE_URL=<url>` and `ANTHROPIC_API_KEY`.
- Codex CLI: a custom provider given with `-c` overrides (`model_provider`, and
  `model_providers.scripted` with `base_url = "<url>/v1"`, `wire_api = "responses"`, `env_key`
  naming the variable that holds the key).
- Gemini CLI: `GOOGLE_GEMINI_BASE_URL=<url>` and `GEMINI_API_KEY`, with
  `security.auth.selectedType = "gemini-api-key"` in its settings.json.

Map of the package:

- `script.py`: the ModelScript (spec/schemas/ModelScript.json) and its sans-IO stepper: which
  turn answers which request, tool calls resolved against the tools a host offers.
- `neutral.py`: the neutral form of a request and of a reply, between dialects and the stepper.
- `dialects/`: one module per model API (`anthropic`: Messages; `openai_responses`: Responses;
  `gemini`: generateContent), each decoding requests and encoding replies and streams.
- `server.py`: the WSGI app (routing, recording) and its loopback server.
- `__main__.py`: the command.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bundle_server.model.neutral import ModelRequest, Reply
from bundle_server.model.script import ScriptStepper
from bundle_server.model.server import ScriptedModelApp, ScriptedModelServer

__all__ = [
    "ModelRequest",
    "Reply",
    "ScriptStepper",
    "ScriptedModel",
    "ScriptedModels",
    "load_script",
    "start_scripted_model",
]

Script = Mapping[str, Any] | str | os.PathLike[str]


def load_script(script: Script) -> Mapping[str, Any]:
    """A script given as data or as the path of a JSON file (checked when it is stepped)."""
    if isinstance(script, Mapping):
        return script
    data = json.loads(Path(script).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{script}: a ModelScript is a JSON object, not a {type(data).__name__}")
    return data


class ScriptedModel:
    """A running scripted model: `url`, `port`, `requests`, `close()`; a context manager."""

    def __init__(self, server: ScriptedModelServer) -> None:
        self._server = server
        self.url: str = server.url
        self.port: int = server.port

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far, as recorded (see server.py), in the order answered."""
        return self._server.app.requests

    @property
    def stepper(self) -> ScriptStepper:
        return self._server.app.stepper

    def close(self) -> None:
        self._server.stop()

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_scripted_model(
    script: Script,
    *,
    port: int = 0,
    record: str | os.PathLike[str] | None = None,
    skills: Iterable[str] | None = None,
    host: str | None = None,
) -> ScriptedModel:
    """Serve `script` on 127.0.0.1 (`port` 0: a free port), recording every request in memory
    and, with `record`, appended to that JSONL file. `skills` (the bundle's, `plugin:skill`)
    are what the script's skill calls name, on `host` (None: the host whose skill tool a
    request offers): `ScriptStepper`."""
    stepper = ScriptStepper(load_script(script), skills=skills, host=host)
    server = ScriptedModelServer(ScriptedModelApp(stepper, record), port)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return ScriptedModel(server)


class ScriptedModels:
    """One script, a scripted model per host session (`bundle-server --model-script`): each
    session, a restart included, plays the script from its first turn. `requests` are every
    model's, in the order answered; every request is also appended to `record`, if given."""

    def __init__(self, script: Script, record: str | os.PathLike[str] | None = None) -> None:
        self.script = load_script(script)
        ScriptStepper(self.script)  # a script that does not conform fails here, not per session
        self._record = record
        self._lock = threading.Lock()
        self._models: list[ScriptedModel] = []
        self._closed = False

    def start(
        self, *, skills: Iterable[str] | None = None, host: str | None = None
    ) -> ScriptedModel:
        """A fresh model on its own loopback port, closed by `close`, or earlier by the
        caller (a session's end); `skills` and `host` as `start_scripted_model` takes them."""
        model = start_scripted_model(self.script, record=self._record, skills=skills, host=host)
        with self._lock:
            if self._closed:
                model.close()
                raise RuntimeError("the scripted models are closed")
            self._models.append(model)
        return model

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            models = list(self._models)
        found = [request for model in models for request in model.requests]
        return sorted(found, key=lambda request: float(request.get("time", 0)))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            models, self._models = self._models, []
        for model in models:
            model.close()
