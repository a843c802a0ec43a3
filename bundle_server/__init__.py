"""bundle_server: the loopback development server, a thin interpreter of spec/routes.toml.

Only routes with a handler are mounted; `unhandled_routes()` lists the rest.
"""

from bundle_server._app import BundleApp, create_app
from bundle_server._routing import complete_groups, unhandled_routes, unknown_handlers

__all__: list[str] = [
    "BundleApp",
    "complete_groups",
    "create_app",
    "unhandled_routes",
    "unknown_handlers",
]
