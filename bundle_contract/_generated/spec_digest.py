"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "496c7d2e2311c411c4af51123e9cbb1870883c2d6f0831fdfc5eeca464c4c621"
