import sys

from bundle_server.collections.cli import main

sys.exit(main())
