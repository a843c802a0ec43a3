"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "9e7fd7cfd5ec61fc4af7b49cf19cda85e4b969367c54ef6debf8961f7c60f33f"
