"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""

CHECKED = "1f17cf01cb6a89922052a20e3e93567d2903d349bfa1eb212813057c95992a10"
