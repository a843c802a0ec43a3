"""The one way text and JSON leave the server as bytes: UTF-8, and never an exception.

The door (`_http.strict_json`) refuses request text that UTF-8 cannot carry, but a record can
still get such text from below it: a route worker's reply, a hook's receipt decoded by a
lenient reader, a bug. Encoding it strictly raised in the middle of a response, and a list
holding the record answered 500 from then on. Here such text goes out with U+FFFD in place of
each lone surrogate, and the fault is logged as a warning: the record stays readable, the list
stays up, and the fault is loud in the server's log.

The same holds for a number JSON cannot write (NaN, Infinity: `1e400` parsed as a float is
one): `json_text` writes such a number as null, as JavaScript's JSON.stringify does, and logs
a warning, where `allow_nan=False` raised and the list answered 500.

`first_unencodable` is the check itself: the door refuses a request with it, and a store
checks a record with it before keeping it (nothing is stored that could not be published).
"""

from __future__ import annotations

import json
import logging
import math
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
        _SURROGATES.fault()
        return replace_surrogates(text).encode("utf-8")


def json_text(value: Any) -> str:
    """`value` as compact JSON text; a non-finite number is written as null (logged)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as error:
        # Only a non-finite float is mended; any other fault (a circular reference) is a bug
        # the caller must see, and mending it would never end.
        if "Out of range float" not in str(error):
            raise
    _NON_FINITE.fault()
    return json.dumps(finite(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def finite(value: Any) -> Any:
    """A copy of the JSON data `value` with each non-finite float replaced by None.

    Iterative, like `first_unencodable`: the data may be nested as deep as the parser allows.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    pending: list[tuple[Any, Any]] = [(value, root)]
    while pending:
        source, copy = pending.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, float) and not math.isfinite(item):
                item = None
            elif isinstance(item, (dict, list, tuple)):
                child: Any = {} if isinstance(item, dict) else []
                pending.append((item, child))
                item = child
            if isinstance(copy, dict):
                copy[key] = item
            else:
                copy.append(item)
    return root


class _FaultReport:
    """Logs mended output (`what`: a %d for the count) as a warning, from a thread of its
    own, soon after.

    Never at once: encoding happens under a hub's lock, and the log is published into the hubs
    (`logs.hub.LogBridge`), which would wait for that very lock. Faults that come while a
    report is pending are counted into it, so a flood of them is one line, not a thread each.
    """

    def __init__(self, what: str) -> None:
        self._what = what
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
        log.warning(self._what, count)


_SURROGATES = _FaultReport("%d text(s) held a lone surrogate; each went out with U+FFFD")
_NON_FINITE = _FaultReport(
    "%d record(s) held a non-finite number (NaN or Infinity); each went out as null"
)


def encodable(text: str) -> bool:
    """Whether UTF-8 can carry `text` (it holds no surrogate)."""
    return text.isascii() or SURROGATE.search(text) is None


def _pointer_segment(key: str | int) -> str:
    return replace_surrogates(str(key)).replace("~", "~0").replace("/", "~1")


def first_unencodable(value: Any) -> str | None:
    """The JSON pointer of the first string (value or key) UTF-8 cannot carry, else None."""
    return _first_fault(value, numbers=False)


def first_unpublishable(value: Any) -> str | None:
    """The JSON pointer of the first string UTF-8 cannot carry or non-finite number, else None.

    Nothing found, the strict encoding (`allow_nan=False`, UTF-8 as is) is tried as well, so
    that whatever else it refuses is caught before anything is stored (`unpublishable`).
    """
    return _first_fault(value, numbers=True)


def unpublishable(value: Any) -> str | None:
    """Why `value` could not be published as it is (where and what), else None: what the
    lists' encoder (`json_text`, `utf8`) would have to mend or could not write at all."""
    at = first_unpublishable(value)
    if at is not None:
        return f"a lone surrogate or a non-finite number, at {at}"
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:  # UnicodeEncodeError is a ValueError
        return str(error)[:200]
    return None


def _first_fault(value: Any, numbers: bool) -> str | None:
    # Iterative: a body nested as deep as the parser allows must not overflow this walk.
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        node, at = pending.pop()
        if isinstance(node, str):
            if not encodable(node):
                return at or "/"
        elif isinstance(node, float):
            if numbers and not math.isfinite(node):
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
