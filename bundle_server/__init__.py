"""bundle_server: the loopback development server, a thin interpreter of spec/routes.toml.

Nothing is exported yet: routes are served once their handlers exist.
"""

__all__: list[str] = []
