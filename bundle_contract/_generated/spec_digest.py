"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "193a59ca09679172df60739b8f9cee0c1939c1710bb2febf3338193ce826e18b"
