"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "50266a9a6d2acd2bc805fa2d4ed526c7baaf746e580e30266fb5738bf367901c"
