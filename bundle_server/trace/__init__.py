"""The trace route group: its handlers and the trace hub."""
