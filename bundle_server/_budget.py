"""The server's byte budget for what it keeps of project code's output (retained-bytes-budget).

Theory of operation:

- The per-invocation render window bounds one run; nothing bounded the sum over the kept
  invocations (each keeps its newest event and its Agent Document whatever their size). One
  ledger per server does: services that keep output charge the bytes they keep and credit
  what they let go (`charge(delta)`, delta negative for a credit). Sizes are the encoded
  sizes the service already knows (a worker's reply line as read), never encoded again.
- `settle()` brings the ledger back under its limit: reclaimers, registered in order, each
  give back what they can, one piece at a time, until the budget holds or none has anything
  left. The invocations register first (the oldest invocation's events, Agent Document,
  result and provider values go first); so a newer run is never emptied while an older one
  still holds something. A reclaimer drops under its owner's locks and credits the ledger
  itself; `settle` is called with no lock held, so it may take any owner's lock.
- `event_bytes()` is the largest render event a server keeps: render-event-budget, never more
  than a quarter of the budget, so no single event can exceed the budget whatever it is set to
  (the test seam sets smaller budgets).
- Thread-safe: one lock for the counters, one for settling (reclaimers are never run twice at
  once, and a charge during a settle is seen by it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from bundle_contract._spec import get_spec

# Gives back at least one piece of what its owner keeps (crediting the ledger itself) and says
# whether it had anything to give.
Reclaimer = Callable[[], bool]


def budget_limit() -> int:
    """The server's budget in bytes (spec/limits.toml retained-bytes-budget)."""
    limit: int = get_spec().limit("retained-bytes-budget")["maximum"]
    return limit


def event_limit() -> int:
    """The largest render event in bytes (spec/limits.toml render-event-budget)."""
    limit: int = get_spec().limit("render-event-budget")["maximum"]
    return limit


class RetentionBudget:
    """One server's ledger of kept bytes; see the module docstring."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = budget_limit() if limit is None else limit
        if self.limit < 1:
            raise ValueError(f"a retention budget must be positive, not {self.limit}")
        self._held = 0
        self._lock = threading.Lock()
        self._settling = threading.Lock()
        self._reclaimers: list[Reclaimer] = []

    def event_bytes(self) -> int:
        """The largest render event kept (see the module docstring)."""
        return min(event_limit(), self.limit // 4)

    @property
    def held(self) -> int:
        return self._held

    @property
    def over(self) -> int:
        """Bytes held past the limit (0 within it)."""
        return max(0, self._held - self.limit)

    def charge(self, delta: int) -> None:
        """Count `delta` more bytes kept (negative: released)."""
        if delta:
            with self._lock:
                self._held += delta

    def add_reclaimer(self, reclaimer: Reclaimer) -> None:
        """Ask `reclaimer` for bytes after those registered before it."""
        self._reclaimers.append(reclaimer)

    def settle(self) -> None:
        """Reclaim, oldest first, until the ledger is within its limit or nothing is left to
        give. Call it with no lock held (reclaimers take their owners' locks)."""
        if not self.over:
            return
        with self._settling:
            for reclaimer in self._reclaimers:
                while self.over and reclaimer():
                    pass
