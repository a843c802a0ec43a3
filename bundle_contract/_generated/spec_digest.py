"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "c338699e2ea19f1cd254eb63c243f091f53739b4d182e704e71b5212f76f43d1"
