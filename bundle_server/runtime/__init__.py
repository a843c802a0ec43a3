"""Development runtime runs (routes `runtime.*`): a route of the active epoch run as a surface;
the `runtime` row of `_services.SERVICES` mounts them."""
