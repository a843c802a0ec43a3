"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "52c6a2e0d845127d1ea3d1d9881bc8c04c28fa36b3ed345e68d05e4dfa0acf06"
