"""bundle_server: the loopback development server, a thin interpreter of spec/routes.toml.

Only routes with a handler are mounted; `unhandled_routes()` lists the rest. `start_dev_server`
runs the app under the gevent shell on a loopback port and returns a `DevServer` handle; the
`bundle-server` command (`python -m bundle_server`) does the same until SIGINT or SIGTERM.
"""

from bundle_server._app import BundleApp, create_app
from bundle_server._dev_server import DevServer, start_dev_server
from bundle_server._routing import complete_groups, unhandled_routes, unknown_handlers

__all__: list[str] = [
    "BundleApp",
    "DevServer",
    "complete_groups",
    "create_app",
    "start_dev_server",
    "unhandled_routes",
    "unknown_handlers",
]
