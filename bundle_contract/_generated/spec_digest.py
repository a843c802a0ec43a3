"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "d0d2993a5d4d2834604f7e77697e70894f5b50509228b95bdbf7d7163550638f"
