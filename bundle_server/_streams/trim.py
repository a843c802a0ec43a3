"""Giving the memory of ended streams back to the system.

A stream's connection allocates a few tens of KiB (its greenlet's saved stack, the handler,
the request, the pieces it writes) from the C heap. When a crowd of streams ends, Python frees
all of it, but glibc keeps the freed pages in its heap for reuse: 200 streams that had replayed
the whole trace left the server's RSS 26-46 MiB above idle for good (tests/test_stream_memory.py),
reused by the next crowd, never returned. `malloc_trim(0)` returns free pages from anywhere in
the heap (the remedy Dask's workers use for the same symptom). It costs about a millisecond on
the server's thread, so it runs at most once per `TRIM_DELAY` seconds, after streams ended.
Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import gevent
from gevent._hub_local import get_hub_if_exists

# Seconds after a stream ends before the trim: a burst of closing streams costs one trim.
TRIM_DELAY = 1.0


def _malloc_trim() -> Callable[[], object] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


MALLOC_TRIM = _malloc_trim()
_pending = threading.local()


def trim_soon() -> None:
    """Trim the heap `TRIM_DELAY` seconds from now, unless a trim is already due (per thread:
    it runs in the calling thread's gevent hub)."""
    if MALLOC_TRIM is None or getattr(_pending, "due", False) or get_hub_if_exists() is None:
        return
    _pending.due = True
    gevent.spawn_later(TRIM_DELAY, _trim)


def _trim() -> None:
    _pending.due = False
    if MALLOC_TRIM is not None:
        MALLOC_TRIM()
