"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "0fbb79aaf1b0d8d117a76935261250561afee22963bdbfbb947335c88e5d4b6d"
