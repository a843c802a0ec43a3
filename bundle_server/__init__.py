"""bundle_server: the loopback development server, a thin interpreter of spec/routes.toml.

Only routes with a handler are mounted; `unhandled_routes()` lists the rest. `start_dev_server`
runs the app under the gevent shell on a loopback port and returns a `DevServer` handle; the
`bundle-server` command (`python -m bundle_server`) does the same until SIGINT or SIGTERM.

Layout: one package per feature, over a small HTTP core and a stream package; each holds its
handlers (registered by route id on import) and its service (a hub, a manager, a loop), and
one row of the service table (`_services.SERVICES`: its factory, its handlers module, its
close) mounts it. Handlers reach a service with `call.state.service(kind)`.

- `_http/`: the HTTP core: the WSGI app, routing, request parsing, the guard, response checks,
  and the gevent shell that serves it;
- `_streams/`: sequenced hubs and cursors (`sequenced`), the NDJSON stream body and wakers
  (`ndjson`), one response carrying several subscriptions (`multiplexed`);
- `_services`: the service table the server walks to start, mount and close its services;
- `trace/`: the trace routes and the trace hub;
- `logs/`: the dev-log routes and the log hub;
- `receipts/`: the hook-receipt route, receipts as trace entries, the endpoint and ready files;
- `project/`: the project loop (builds, epochs, development installs, the server lock), the
  project event hub and the project routes;
- `notices/`: the project's notice ledger in the server (fed by the project and trace hubs,
  told as project events) and its routes;
- `invocations/`: route invocations (a route of the active epoch run in a worker) and their
  routes;
- `runtime/`: development runtime runs (a route run as a surface) and their routes;
- `mcp/`: the MCP sessions of the active epoch's servers, the asyncio bridge the SDK runs on,
  MCP App bindings and the MCP routes;
- `agent/`: the agent endpoint (an MCP server of the development server's own, off by
  default) and its tools;
- `multiplex/`: multiplexed streams (a tab's session, trace, log and project streams in one
  connection): their subscriptions' sources and routes;
- `sessions/`: the host-session routes, their server-sent-events stream and the PTY engine
  (`sessions/pty/`);
- `workbench/`: the Workbench page (`static/`), the session hand-over, the OpenAPI document
  and the App frame (MCP App previews on an origin of their own);
- `model/`: the scripted model, a loopback server of its own that speaks the real hosts' model
  APIs from a script; with a script (`bundle-server --model-script`) the development server
  starts one per host session (its `model` service row); its API is `bundle_server.model`;
- `evals/`: evaluation runs (trials as host sessions of a server of their own, graded,
  compared and reported) and the `bundle-evals` command; its API is `bundle_server.evals`;
- `_dev_server`, `_runner`, `_project_config`, `_ids`: the server wired together, its command,
  the project's server configuration, and resource ids.

The names below load on first use, as bundle_contract's do: `bundle-server --help` and
`bundle-evals --help` must not pay for the server's imports (seconds on a busy machine).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the private module that defines it. This table is the public API.
_EXPORTS = {
    "BundleApp": "_http.app",
    "create_app": "_http.app",
    "DevServer": "_dev_server",
    "start_dev_server": "_dev_server",
    "complete_groups": "_http.routing",
    "unhandled_routes": "_http.routing",
    "unknown_handlers": "_http.routing",
}

# A literal, so type checkers see the names exported (a test holds it equal to the table).
__all__ = [
    "BundleApp",
    "DevServer",
    "complete_groups",
    "create_app",
    "start_dev_server",
    "unhandled_routes",
    "unknown_handlers",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bundle_server' has no attribute {name!r}")
    # The whole server first, as an eager import did: its services' modules register their
    # handlers on import, and `unhandled_routes()` must see every one.
    importlib.import_module("bundle_server._dev_server")
    value = getattr(importlib.import_module(f"bundle_server.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # the same names, for type checkers; a test holds both lists equal
    from bundle_server._dev_server import DevServer, start_dev_server
    from bundle_server._http.app import BundleApp, create_app
    from bundle_server._http.routing import complete_groups, unhandled_routes, unknown_handlers
