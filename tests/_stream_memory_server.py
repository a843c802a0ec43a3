"""A server process for the stream memory test: a full trace history, then commands on stdin.

Run as `python tests/_stream_memory_server.py ENTRIES`: it fills a trace hub with ENTRIES
entries of about 500 bytes, serves it (the production shell, in its own thread), prints its
port, then answers each stdin line `subscribers` with the hub's subscriber count. The test
reads this process's RSS from /proc, so nothing else (no client) shares its memory.
"""

from __future__ import annotations

import sys

from _live import serve

from bundle_server.trace.hub import TraceHub


def main() -> None:
    entries = int(sys.argv[1])
    hub = TraceHub()
    filler = "x" * 400
    for index in range(entries):
        hub.publish("diagnostic", "test.entry", f"entry {index}", details={"filler": filler})
    for server in serve(hub, keepalive=60):
        print(server.port, flush=True)
        for line in sys.stdin:
            if line.strip() == "trim":
                import ctypes

                print(ctypes.CDLL("libc.so.6").malloc_trim(0), flush=True)
            if line.strip() == "subscribers":
                print(hub.subscriber_count, flush=True)


if __name__ == "__main__":
    main()
