"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "25dc4124d80ddf413ad166aefba9731ddd33a5e931742ff4b5b2b2d74bff176f"
