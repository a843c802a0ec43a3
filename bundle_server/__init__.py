"""bundle_server: the loopback development server, a thin interpreter of spec/routes.toml.

Only routes with a handler are mounted; `unhandled_routes()` lists the rest. `start_dev_server`
runs the app under the gevent shell on a loopback port and returns a `DevServer` handle; the
`bundle-server` command (`python -m bundle_server`) does the same until SIGINT or SIGTERM.

Layout: one package per route group, over a small HTTP core and a stream package; each group
holds its handlers (registered by route id on import, see `_http.app`) and its hub or manager.

- `_http/`: the HTTP core: the WSGI app, routing, request parsing, the guard, response checks,
  and the gevent shell that serves it;
- `_streams/`: sequenced hubs and cursors (`sequenced`), the NDJSON stream body and wakers
  (`ndjson`);
- `trace/`: the trace routes and the trace hub;
- `logs/`: the dev-log routes and the log hub;
- `receipts/`: the hook-receipt route, receipts as trace entries, the endpoint and ready files;
- `sessions/`: the host-session routes, their server-sent-events stream and the PTY engine
  (`sessions/pty/`);
- `workbench/`: the Workbench page (`page/workbench.html`), the session hand-over and the
  OpenAPI document;
- `evals/`: evaluation runs (trials as host sessions of a server of their own, graded,
  compared and reported) and the `bundle-evals` command; its API is `bundle_server.evals`;
- `_dev_server`, `_runner`, `_project_config`: the server wired together, its command, and the
  project's server configuration.
"""

from bundle_server._dev_server import DevServer, start_dev_server
from bundle_server._http.app import BundleApp, create_app
from bundle_server._http.routing import complete_groups, unhandled_routes, unknown_handlers

__all__: list[str] = [
    "BundleApp",
    "DevServer",
    "complete_groups",
    "create_app",
    "start_dev_server",
    "unhandled_routes",
    "unknown_handlers",
]
