"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "f882d8f684e9559ffaafd46e48c746d3a29c285f808b0ad211ba58204719b6bf"
