"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "0c9d26dd2843c4b3ae6d62208ba8d38eb8c312945ddaf4788e1c73a77baae239"
