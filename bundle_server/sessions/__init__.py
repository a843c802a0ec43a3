"""The host-session route group: its handlers, the SSE stream and the PTY engine (`pty`)."""
