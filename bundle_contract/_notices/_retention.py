"""The notice ledger's retention settings (seed 001 Limits): `terminalTtl`, `maxTerminal`,
`maxJournalBytes`, each defaulting to its limits.toml row; `terminalTtl` is milliseconds (a
number or digits) or a duration such as `7d`, `12h`, `30m`, `90s`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundle_contract._generated.errors import NoticeRetentionInvalid
from bundle_contract._spec import get_spec

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
DURATION = re.compile(r"(?P<count>[0-9]{1,15})(?P<unit>ms|s|m|h|d)?")
# The smallest journal (DevConfig.json `maxJournalBytes` minimum): one notice line always fits.
MIN_JOURNAL_BYTES = 65536


def parse_terminal_ttl(value: object) -> int:
    """`terminalTtl` in milliseconds: a non-negative integer, or text `<digits>[ms|s|m|h|d]`
    (digits alone are milliseconds). Raises NoticeRetentionInvalid (BX5003) otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        found = DURATION.fullmatch(value)
        if found is not None:
            return int(found["count"]) * UNIT_MS[found["unit"] or "ms"]
    raise NoticeRetentionInvalid(
        f"terminalTtl {str(value)[:40]!r} is neither milliseconds nor a duration such as "
        "7d, 12h, 30m, 90s",
        {"setting": "terminalTtl"},
    )


@dataclass(frozen=True)
class NoticeRetention:
    """How much of its history a notice ledger keeps (terminal notices; open ones stay)."""

    terminal_ttl_ms: int
    max_terminal: int
    max_journal_bytes: int

    @classmethod
    def defaults(cls) -> NoticeRetention:
        """The seed's: seven days, 500 terminal notices, a 16 MiB journal."""
        spec = get_spec()
        return cls(
            terminal_ttl_ms=spec.limit("notice-terminal-age")["maximum"],
            max_terminal=spec.limit("notice-terminal-kept")["maximum"],
            max_journal_bytes=spec.limit("notice-journal-bytes")["maximum"],
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> NoticeRetention:
        """The retention a DevConfig `notices` mapping sets, the defaults filling what it
        leaves out. Raises NoticeRetentionInvalid (BX5003) for a value that is not one."""
        base = cls.defaults()
        given = dict(settings or {})
        unknown = sorted(set(given) - {"terminalTtl", "maxTerminal", "maxJournalBytes"})
        if unknown:
            raise NoticeRetentionInvalid(
                f"unknown notice setting {unknown[0]!r}", {"setting": unknown[0]}
            )
        ttl = base.terminal_ttl_ms
        if "terminalTtl" in given:
            ttl = parse_terminal_ttl(given["terminalTtl"])
        return cls(
            terminal_ttl_ms=ttl,
            max_terminal=_count(given, "maxTerminal", base.max_terminal, 0),
            max_journal_bytes=_count(
                given, "maxJournalBytes", base.max_journal_bytes, MIN_JOURNAL_BYTES
            ),
        )


def _count(given: Mapping[str, Any], name: str, default: int, minimum: int) -> int:
    value = given.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise NoticeRetentionInvalid(
            f"{name} {str(value)[:40]!r} is not an integer of at least {minimum}",
            {"setting": name},
        )
    return value
