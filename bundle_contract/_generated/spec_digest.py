"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "32343034dc8014f0581fa502bfa96fea58164211aabd4e8300576649b53d3a0a"
