"""The host-session route group: its handlers, the SSE stream and the PTY engine (`pty`); the
`sessions` row of `_services.SERVICES` mounts it."""
