"""A process that tries to outlive its owner: `python escapee.py PID_FILE`.

It leaves its parent's session (`setsid`), ignores SIGHUP and SIGTERM, writes its pid to
PID_FILE (atomically, so a reader never sees half of it) and sleeps. Only SIGKILL, or a
cgroup's kill, ends it. Tests start it from route code, a bundle.config.py or an MCP server
and check that the owner of that code ends it.
"""

import os
import signal
import sys
import time

os.setsid()
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = sys.argv[1]
with open(path + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.replace(path + ".tmp", path)
time.sleep(120)
