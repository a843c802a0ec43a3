"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

<<<<<<< HEAD
CHECKED = "d0d2993a5d4d2834604f7e77697e70894f5b50509228b95bdbf7d7163550638f"
=======
CHECKED = "52c6a2e0d845127d1ea3d1d9881bc8c04c28fa36b3ed345e68d05e4dfa0acf06"
>>>>>>> mcp-messages
