"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "4dc501564f20c354dc2d054810f7a4542c40cd3a1e3fc4da50fdd9969752350f"
