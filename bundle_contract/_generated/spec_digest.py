"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "fc59de1d442b3913390fdbd399e3bde37d142e0213b96435c2a5f614be127e55"
