"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "76ea2bdfd99746c49f86f73a1feff98443ed53df1ac2fba5c0b5d85b7b7d1e9d"
