"""conformance: black-box checks of any bundle-devkit server, keyed by spec/requirements.toml.

Nothing is exported yet: checks arrive with the server routes they verify.
"""

__all__: list[str] = []
