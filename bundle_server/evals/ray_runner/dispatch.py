"""Which trial goes to which node, and what a lost node gives back: the driver's bookkeeping,
without Ray (sans-IO), so that its rules hold whatever the cluster does.

- Trials wait in the run's order. Each free slot takes the next one, the node with the most
  free slots first, so a run spreads over every node rather than filling the first.
- A node that is lost gives its running trials back to the front of the queue: they run next,
  on the nodes that are left, each at most `reruns` times (eval-trial-reruns); a trial lost
  once more is given up (`given_up`: the driver records it as an error). A trial that failed
  on its own came back with a record and is never run again.
- A trial is done once, by its key (case, arm, index): a second record of it (a node thought
  lost that answered after all, its trial having run again elsewhere) is not one to keep.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from bundle_server.evals.trial import Trial


@dataclass
class _Node:
    slots: int
    running: set[Trial] = field(default_factory=set)

    @property
    def free(self) -> int:
        return self.slots - len(self.running)


class Dispatch:
    """The trials of one run over the nodes that are ready for them."""

    def __init__(self, trials: Sequence[Trial], reruns: int | None = None) -> None:
        self._order = {trial.key: number for number, trial in enumerate(trials)}
        self._queue = deque(trials)
        self._nodes: dict[str, _Node] = {}
        self._done: set[tuple[str, str, int]] = set()
        self._reruns = reruns  # None: no bound
        self._lost: dict[tuple[str, str, int], list[str]] = {}  # trial -> nodes lost under it
        self._given_up: list[tuple[Trial, list[str]]] = []

    @property
    def nodes(self) -> list[str]:
        return list(self._nodes)

    @property
    def complete(self) -> bool:
        return len(self._done) == len(self._order)

    def running_on(self, node: str) -> list[Trial]:
        found = self._nodes.get(node)
        return self._sorted(found.running) if found is not None else []

    def add(self, node: str, slots: int) -> None:
        """`node` is ready with `slots` trials at once."""
        self._nodes[node] = _Node(max(1, slots))

    def assign(self) -> list[tuple[str, Trial]]:
        """Fill every free slot: (node, trial) pairs to start now."""
        started = []
        while self._queue:
            free = [(found.free, name) for name, found in self._nodes.items() if found.free > 0]
            if not free:
                break
            _, name = min(free, key=lambda item: (-item[0], item[1]))  # most free; then by name
            trial = self._queue.popleft()
            self._nodes[name].running.add(trial)
            started.append((name, trial))
        return started

    def finished(self, node: str, trial: Trial) -> bool:
        """`trial` came back from `node` with its record: True when it is the trial's first
        (the one to keep)."""
        found = self._nodes.get(node)
        if found is not None:
            found.running.discard(trial)
        if trial.key in self._done:
            return False
        self._done.add(trial.key)
        if trial in self._queue:  # given back by a node thought lost, which answered after all
            self._queue.remove(trial)
        return True

    def lose(self, node: str) -> list[Trial]:
        """`node` is gone: its running trials, given back to run next elsewhere (those lost
        too often are given up instead: `given_up`)."""
        found = self._nodes.pop(node, None)
        if found is None:
            return []
        back = []
        for trial in self._sorted(found.running):
            if trial.key in self._done:
                continue
            lost = self._lost.setdefault(trial.key, [])
            lost.append(node)
            if self._reruns is not None and len(lost) > self._reruns:
                self._done.add(trial.key)
                self._given_up.append((trial, list(lost)))
            else:
                back.append(trial)
        self._queue.extendleft(reversed(back))
        return back

    def given_up(self) -> list[tuple[Trial, list[str]]]:
        """The trials given up since last asked, each with the nodes lost under it."""
        found, self._given_up = self._given_up, []
        return found

    def _sorted(self, trials: set[Trial]) -> list[Trial]:
        return sorted(trials, key=lambda trial: self._order[trial.key])
