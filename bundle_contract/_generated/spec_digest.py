"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "9b304cad693b8b570d22ab918db34467d2630aeefa61ba232ac131188d7c3bc1"
