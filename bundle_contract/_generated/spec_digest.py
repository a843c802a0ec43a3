"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "dfc1c1e610bf8237a8604614f7802493e66a6846e5f014787b034dc931cf6563"
