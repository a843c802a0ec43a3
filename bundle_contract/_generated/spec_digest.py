"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "05c82d5353aa87d62732e483b876e9fec6f6d08002a0747eac01b9fc2320012d"
