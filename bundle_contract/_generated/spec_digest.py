"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "7e37061790927ff73f6ff49fc99dd0e3a8a421053ab18255d94ae67b1c2d37c4"
