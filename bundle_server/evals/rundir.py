"""A run directory: `run.json` (EvalRun.json) and, while the run goes on, `results.jsonl`.

The run record is written atomically (a temporary file, fsync, rename) when the run starts
and when it completes; in between each finished trial is appended to the journal as one
line, flushed and synced. So a run killed at any moment leaves its header and every trial it
finished, a reader (a resume, `bundle-evals report`) merges the two, and the cost per trial
stays one line however long the run: rewriting the whole record per trial would make a long
run quadratic. Only the journal's last line can be torn by a kill; it is dropped. Completing
the run folds the journal into run.json and removes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bundle_contract._command import reason
from bundle_contract._generated.errors import EvalRunInvalid
from bundle_contract._validation import problems

RUN_FILE = "run.json"
JOURNAL = "results.jsonl"
CONFIG_FILES = ("bundle.config.json", "bundle.config.py")


def run_file(path: str | os.PathLike[str]) -> Path:
    """A run's record: `path` itself, or run.json in the run directory `path`."""
    path = Path(path)
    return path / RUN_FILE if path.is_dir() else path


def project_of(suite: str | os.PathLike[str]) -> Path:
    """The project a suite belongs to: the nearest directory above it with a bundle config
    (else the working directory)."""
    for directory in Path(suite).resolve().parents:
        if any((directory / name).is_file() for name in CONFIG_FILES):
            return directory
    return Path.cwd()


def save(out: Path, record: Mapping[str, Any]) -> None:
    """run.json, replaced atomically: a reader never sees half of it."""
    temporary = out / f".{RUN_FILE}.{os.getpid()}.{threading.get_ident()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, out / RUN_FILE)


def append(out: Path, result: Mapping[str, Any]) -> None:
    """One finished trial, at the end of the journal."""
    with open(out / JOURNAL, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(result) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def complete(out: Path, record: Mapping[str, Any]) -> None:
    """The completed record in run.json; the journal it now holds goes."""
    save(out, record)
    with contextlib.suppress(FileNotFoundError):
        os.remove(out / JOURNAL)


def read_run(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run record (a run directory or its run.json) with its journal's trials, checked
    against EvalRun.json (BX4803)."""
    path = run_file(path)
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError) as error:
        raise EvalRunInvalid(
            f"cannot read the run record {path}: {reason(error)}", {"path": str(path)}
        ) from None
    if isinstance(record, dict) and isinstance(record.get("results"), list):
        record["results"] = merged(record["results"], journal(path.parent / JOURNAL))
    found = problems("EvalRun.json", record)
    if found:
        raise EvalRunInvalid(f"{path}: {found[0]}"[:1000], {"path": str(path)})
    return dict(record)


def journal(path: Path) -> list[Any]:
    """The journal's trials (none when there is no journal); a torn last line is dropped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise EvalRunInvalid(f"cannot read {path}: {reason(error)}", {"path": str(path)}) from None
    found = []
    for number, line in enumerate(lines):
        try:
            found.append(json.loads(line))
        except ValueError:
            if number == len(lines) - 1:
                break  # the write a kill interrupted
            raise EvalRunInvalid(
                f"{path}: line {number + 1} is not JSON", {"path": str(path)}
            ) from None
    return found


def merged(results: list[Any], more: list[Any]) -> list[Any]:
    """`results` then `more`, one trial per (case, arm, index): a later record wins."""
    keyed: dict[tuple[Any, ...], Any] = {}
    for result in [*results, *more]:
        key = (
            tuple(result.get(k) for k in ("caseId", "arm", "index"))
            if isinstance(result, dict)
            else (id(result),)
        )
        keyed[key] = result
    return list(keyed.values())
