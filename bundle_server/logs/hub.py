"""Raw logs: the framework's diagnostic log lines as a sequenced, browser-safe stream.

Theory of operation: `LogBridge` is a `logging.Handler` that turns each record of the server's
loggers into a DevLogRecord and publishes it into a `LogHub` (a `SequencedHub`, so replay,
gaps and subscribers work exactly as for the trace). What reaches a browser is cut down here:

- context: only the keys DevLogRecord.json allows, taken from `extra={"context": {...}}`, and
  only string values; anything else a caller attached is dropped, never rendered.
- text: control characters (except tab and newline) and bidirectional overrides are replaced,
  and the message is cut at `log-message` characters, so a log line cannot spoof the page.
- a record with a correlationId, invocationId or mcpSessionId links to
  `/trace?correlation=<value>` (seed 000); an uncorrelated one carries no link.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from functools import cache
from typing import Any
from urllib.parse import quote

from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec, plain
from bundle_contract._validation import validate
from bundle_server._streams.sequenced import Record, SequencedHub
from bundle_server.trace.hub import TraceHub

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# DevLogRecord levels by the lowest Python level they take (CRITICAL and custom levels fall
# into the band they sit in).
LEVELS = ((logging.ERROR, "error"), (logging.WARNING, "warn"), (logging.INFO, "info"))
# The Workbench route a correlated record links to (seed 000, Raw logs: /trace?correlation=).
TRACE_PAGE_ROUTE = "workbench.trace"


def level_name(levelno: int) -> str:
    """The DevLogRecord level of a Python logging level."""
    return next((name for floor, name in LEVELS if levelno >= floor), "debug")


@cache
def trace_link_prefix() -> str:
    """`/trace?correlation=`: the trace page route's path and its one query parameter."""
    row = get_spec().route(TRACE_PAGE_ROUTE)
    (name,) = row["query"]
    return f"{row['path']}?{name}="


@cache
def link_keys() -> tuple[str, ...]:
    """The context keys a record may link by (seed 000, Raw logs), in order: those of
    DevLogRecord.json's `href` rule."""
    schema = plain(get_spec().schemas["DevLogRecord"])
    rule = schema["then"]["properties"]["context"]["anyOf"]
    return tuple(key for alternative in rule for key in alternative["required"])


@cache
def context_keys() -> tuple[str, ...]:
    """The context keys DevLogRecord.json allows."""
    schema = plain(get_spec().schemas["DevLogRecord"])
    return tuple(sorted(schema["properties"]["context"]["properties"]))


def browser_safe(text: str, limit: int) -> str:
    """`text` with unsafe characters replaced by U+FFFD and cut at `limit` characters."""
    safe = UNSAFE.sub("\ufffd", text)
    return safe if len(safe) <= limit else safe[: limit - 1] + "\u2026"


class LogHub(SequencedHub):
    """Sequenced raw log records with replay (`log.gap`) and live subscribers."""

    name = "log hub"
    gap_type = "log.gap"
    items_key = "records"
    frame_type = "log.record"
    frame_key = "record"
    keepalive_type = "log.keepalive"

    def __init__(self, retention: int | None = None, queue_capacity: int | None = None) -> None:
        spec = get_spec()
        super().__init__(retention or spec.limit("log-retention")["maximum"], queue_capacity)
        self._message_limit = spec.limit("log-message")["maximum"]
        self._allowed = frozenset(context_keys())

    def publish(self, level: str, message: str, context: Mapping[str, Any] | None = None) -> Record:
        """Publish one record; disallowed or non-string context values are dropped."""
        kept = {
            key: browser_safe(value, self._message_limit)
            for key, value in (context or {}).items()
            if key in self._allowed and isinstance(value, str)
        }
        record: Record = {
            "sequence": 1,
            "occurredAt": utc_timestamp(),
            "level": level,
            "message": browser_safe(message, self._message_limit),
            "context": kept,
        }
        link = next((kept[key] for key in link_keys() if kept.get(key)), None)
        if link is not None:
            record["href"] = trace_link_prefix() + quote(link, safe="")

        def numbered(sequence: int) -> Record:
            record["sequence"] = sequence
            validate("DevLogRecord.json", record)
            return record

        return self._append(numbered)


class LogBridge(logging.Handler):
    """Publishes the records of the loggers it is attached to into a LogHub.

    Attach it to the server's loggers (`attach`); context travels as
    `log.info("...", extra={"context": {"invocationId": ...}})`. Given the trace hub too,
    warnings and errors also become trace entries of source `log`, correlated by the same
    context, so the unified trace shows what went wrong next to what was running.
    """

    def __init__(
        self, hub: LogHub, level: int = logging.INFO, trace: TraceHub | None = None
    ) -> None:
        super().__init__(level)
        self.hub = hub
        self.trace = trace
        self._attached: list[logging.Logger] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.hub.closed:
            return
        try:
            message = record.getMessage()
            if record.exc_info and record.exc_info[0] is not None:
                # The exception's type only: a stack or its message may carry paths or secrets.
                message += f" ({record.exc_info[0].__name__})"
            context = getattr(record, "context", None)
            published = self.hub.publish(
                level_name(record.levelno),
                message,
                context if isinstance(context, Mapping) else None,
            )
            if self.trace is not None and record.levelno >= logging.WARNING:
                self._mirror(published)
        except Exception:
            self.handleError(record)

    def _mirror(self, published: Record) -> None:
        assert self.trace is not None
        if self.trace.closed:
            return
        level = published["level"]
        self.trace.publish(
            "log",
            f"log.{level}",
            published["message"],
            published["context"],
            status="error" if level == "error" else "ok",
            details={"logSequence": published["sequence"]},
        )

    def attach(self, *names: str) -> LogBridge:
        """Attach to the named loggers (default: bundle_server and bundle_contract)."""
        for name in names or ("bundle_server", "bundle_contract"):
            logger = logging.getLogger(name)
            logger.addHandler(self)
            if logger.level == logging.NOTSET or logger.level > self.level:
                logger.setLevel(self.level)
            self._attached.append(logger)
        return self

    def detach(self) -> None:
        for logger in self._attached:
            logger.removeHandler(self)
        self._attached.clear()
