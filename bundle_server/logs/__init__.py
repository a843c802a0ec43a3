"""The dev-log route group: its handlers and the log hub."""
