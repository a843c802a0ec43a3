"""The model APIs the scripted model speaks, one module per API, chosen by name from `DIALECTS`.

A dialect is five functions over the neutral form (`bundle_server.model.neutral`):

- `route(method, path, headers)`: the `Operation` a request asks for, or None when the request
  is not this dialect's. Operation `turn` is a model turn (the script answers it); the others
  (`count`, `models`, `model`, ...) are what a host asks besides, answered by `other`.
- `decode(operation, body)`: a turn's JSON body as a `ModelRequest`.
- `reply(request, reply, serial)`: the reply as the dialect's JSON response body.
- `stream(request, reply, serial)`: the reply as the dialect's Server-Sent Events, whole.
- `other(operation, body)`: the JSON answer to a non-turn operation.

`serial` numbers the server's requests, from 1: ids made from it (message, response ids) are
stable from one run of a script to the next. `find(method, path, headers)` asks each dialect in
turn (`anthropic`, `openai-responses`, `gemini`); a path two APIs share (`GET /v1/models`) goes
to the one whose headers the request carries.
"""

from __future__ import annotations

from collections.abc import Mapping

from bundle_server.model.dialects import anthropic, gemini, openai_responses
from bundle_server.model.dialects._wire import Dialect, Operation

DIALECTS: dict[str, Dialect] = {
    dialect.name: dialect
    for dialect in (anthropic.DIALECT, openai_responses.DIALECT, gemini.DIALECT)
}


def find(method: str, path: str, headers: Mapping[str, str]) -> tuple[Dialect, Operation] | None:
    """The dialect and operation of a request (header names in lower case), else None."""
    for dialect in DIALECTS.values():
        operation = dialect.route(method, path, headers)
        if operation is not None:
            return dialect, operation
    return None
