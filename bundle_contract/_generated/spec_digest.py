"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "a04a0d772416b5fd24062db5c9c21670eb3211f3f40cf5f697ef8d74a51dbe4a"
