"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "5facd26ed724e3edbca28c5d0a1548b02492a2cee03b9527137383010fcef606"
