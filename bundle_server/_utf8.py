"""The one way text leaves the server as bytes: UTF-8, and never an exception.

The door (`_http.strict_json`) refuses request text that UTF-8 cannot carry, but a record can
still get such text from below it: a route worker's reply, a hook's receipt decoded by a
lenient reader, a bug. Encoding it strictly raised in the middle of a response, and a list
holding the record answered 500 from then on. Here such text goes out with U+FFFD in place of
each lone surrogate, and the fault is logged as a warning: the record stays readable, the list
stays up, and the fault is loud in the server's log.

`first_unencodable` is the check itself: the door refuses a request with it, and a store
checks a record with it before keeping it (nothing is stored that could not be published).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

log = logging.getLogger("bundle_server")

# Every UTF-16 surrogate: in a Python `str` one is text UTF-8 cannot encode (JSON's
# `\ud83d\ude00` form of a valid pair is joined into one code point by the parser).
SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> str:
    """`text` with each surrogate replaced by U+FFFD."""
    return SURROGATE.sub("\ufffd", text)


def utf8(text: str) -> bytes:
    """`text` as UTF-8; a lone surrogate becomes U+FFFD (logged), never a UnicodeEncodeError."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        _REPORT.fault()
        return replace_surrogates(text).encode("utf-8")


class _FaultReport:
    """Logs replaced text as a warning, from a thread of its own, soon after.

    Never at once: encoding happens under a hub's lock, and the log is published into the hubs
    (`logs.hub.LogBridge`), which would wait for that very lock. Faults that come while a
    report is pending are counted into it, so a flood of them is one line, not a thread each.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def fault(self) -> None:
        with self._lock:
            self._count += 1
            if self._count > 1:
                return  # a report is already on its way
        threading.Thread(target=self._report, name="utf8-fault-report", daemon=True).start()

    def _report(self) -> None:
        with self._lock:
            count, self._count = self._count, 0
        log.warning("%d text(s) held a lone surrogate; each went out with U+FFFD", count)


_REPORT = _FaultReport()


def encodable(text: str) -> bool:
    """Whether UTF-8 can carry `text` (it holds no surrogate)."""
    return text.isascii() or SURROGATE.search(text) is None


def _pointer_segment(key: str | int) -> str:
    return replace_surrogates(str(key)).replace("~", "~0").replace("/", "~1")


def first_unencodable(value: Any) -> str | None:
    """The JSON pointer of the first string (value or key) UTF-8 cannot carry, else None.

    Iterative: a body nested as deep as the parser allows must not overflow this walk.
    """
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        node, at = pending.pop()
        if isinstance(node, str):
            if not encodable(node):
                return at or "/"
        elif isinstance(node, dict):
            for key, item in node.items():
                where = f"{at}/{_pointer_segment(key)}"
                if isinstance(key, str) and not encodable(key):
                    return where
                pending.append((item, where))
        elif isinstance(node, list):
            pending.extend((item, f"{at}/{index}") for index, item in enumerate(node))
    return None
