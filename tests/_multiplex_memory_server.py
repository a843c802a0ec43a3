"""A server process for the multiplexed stream's memory test: a full trace history, then
commands on stdin.

Run as `python tests/_multiplex_memory_server.py ENTRIES FILLER`: it fills a trace hub with
ENTRIES entries carrying FILLER bytes of details each, serves it (the production shell, in its
own thread), prints its port, then answers each stdin line: `subscribers` (the hub's
subscriber count), `streams` (open multiplexed streams), `publish N` (N more entries like the
first, then `ok`). The test reads this process's RSS from /proc, so nothing else (no client)
shares its memory.
"""

from __future__ import annotations

import sys

from _live import serve

from bundle_server.trace.hub import TraceHub


def main() -> None:
    entries, size = int(sys.argv[1]), int(sys.argv[2])
    hub = TraceHub()
    filler = "x" * size

    def publish(count: int) -> None:
        for index in range(count):
            hub.publish("diagnostic", "test.entry", f"entry {index}", details={"filler": filler})

    publish(entries)
    for server in serve(hub, keepalive=60):
        print(server.port, flush=True)
        for line in sys.stdin:
            command, *args = line.split()
            if command == "subscribers":
                print(hub.subscriber_count, flush=True)
            elif command == "trim":
                import ctypes

                print(ctypes.CDLL("libc.so.6").malloc_trim(0), flush=True)
            elif command == "publish":
                publish(int(args[0]))
                print("ok", flush=True)


if __name__ == "__main__":
    main()
