"""The trace route group: its handlers and the trace hub; the `hub` row of `_services.SERVICES`
mounts it."""
