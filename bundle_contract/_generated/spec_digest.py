"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "a8bddc208b215fb2796ccbd2dacbccc42562087fe60e6967615ffd11a3f9e3fb"
