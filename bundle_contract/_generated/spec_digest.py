"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "88c944cf29132191c3a26c647d5046d9eb77c0d1df75d39a650725688eede678"
