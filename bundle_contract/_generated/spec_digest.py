"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "c02ef52aa4717d675ef9d7b6c1dcef416348d278a831e94176b6c1c0a6ac3a15"
