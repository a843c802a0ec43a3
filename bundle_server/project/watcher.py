"""Watching the project's files with watchfiles (Rust notify), in a native thread.

Changes are grouped the watchfiles way: a batch is handed over once no change has arrived for
`watch-quiet` milliseconds, or after `watch-batch` milliseconds of continuous changes (limits
of spec/limits.toml), so an editor's save is one batch and a checkout of a thousand files is
one or two. Paths the build ignores (runtime.toml [project]: .bundle, VCS, caches, editor
droppings) never make a batch. `on_change` receives the batch's project-relative paths, sorted,
from the watcher's thread; it must only hand them over (the project loop queues them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, watch

from bundle_contract._build import layout
from bundle_contract._spec import get_spec

log = logging.getLogger("bundle_server.watch")


class ProjectWatcher:
    """Calls `on_change(paths)` for each batch of changes under `root` until `close()`."""

    def __init__(self, root: Path, on_change: Callable[[list[str]], None]) -> None:
        self._root = root.resolve()
        self._on_change = on_change
        self._stop = threading.Event()
        self._ready = threading.Event()
        spec = get_spec()
        self._quiet = spec.limit("watch-quiet")["maximum"]
        self._batch = spec.limit("watch-batch")["maximum"]
        self._thread = threading.Thread(target=self._run, name="project-watcher", daemon=True)

    def start(self) -> ProjectWatcher:
        self._thread.start()
        return self

    def _relevant(self, change: Change, path: str) -> bool:
        try:
            relative = Path(path).relative_to(self._root).as_posix()
        except ValueError:
            return False
        return relative != "." and not layout().ignored(relative)

    def _run(self) -> None:
        try:
            for changes in watch(
                self._root,
                watch_filter=self._relevant,
                debounce=self._batch,
                step=self._quiet,
                stop_event=self._stop,
                raise_interrupt=False,
                rust_timeout=500,
            ):
                paths = sorted({Path(p).relative_to(self._root).as_posix() for _, p in changes})
                if paths and not self._stop.is_set():
                    self._on_change(paths)
        except Exception:  # the watcher must not take the server down with it
            if not self._stop.is_set():
                log.exception("the project watcher stopped; edits are no longer rebuilt")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
