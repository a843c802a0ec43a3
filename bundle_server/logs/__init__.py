"""The dev-log route group: its handlers and the log hub; the `logs` row of
`_services.SERVICES` mounts it."""
