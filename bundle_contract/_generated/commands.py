"""Generated from spec/ by `python -m bundle_contract generate`. Do not edit."""

EXIT_OK = 0  # runtime.toml [[exit]] ok
EXIT_FAILURE = 1  # runtime.toml [[exit]] failure
EXIT_USAGE = 2  # runtime.toml [[exit]] usage
EXIT_INTERRUPTED = 130  # runtime.toml [[exit]] interrupted
EXIT_HOOK = 0  # runtime.toml [[exit]] hook
PORT_MINIMUM = 0  # StartOptions.json port
PORT_MAXIMUM = 65535  # StartOptions.json port
