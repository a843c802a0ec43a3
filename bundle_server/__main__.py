"""`python -m bundle_server`: the same as the `bundle-server` console script."""

from bundle_server._runner import main

raise SystemExit(main())
