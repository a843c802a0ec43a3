"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "9141cb3d6f6ff5f4625660c50bd3442b395f0e95560cd2d5f0697162c522b50b"
