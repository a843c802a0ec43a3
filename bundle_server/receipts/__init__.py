"""The hook-receipt route group: its handler, receipts as trace entries, the endpoint file;
the `receipts` row of `_services.SERVICES` mounts its handler (the trace hub is its service)."""
