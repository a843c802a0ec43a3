"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "154aad049498d91ff3a1d90f85c0691f364c88c16d1531f6781ed4ae9fd194cd"
