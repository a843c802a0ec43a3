"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "655df44199dafe5139260bf037600407fd7c0e06f9e9ba876ebdcd22d7345923"
