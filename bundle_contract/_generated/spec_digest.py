"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "9a62f1ad7c1782f70210b762c34789297db25e29c650bf3d53bb43984b4a9dd8"
