"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "5909b55720163a90a4ec9fc26f2bbe56f60c478ea7d778438e06ff3d7fc6d30a"
