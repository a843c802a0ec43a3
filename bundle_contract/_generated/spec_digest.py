"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "eb22e63da1e447ad72e6116d24ce4ec3440c4bd51bd2f082f29c44b4edb19a0d"
