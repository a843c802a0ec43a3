"""One node of a Ray run: the body of the actor the driver places on it (`_ray.actor_class`).

Theory of operation: the actor lives in a Ray worker process of its node, for one run.
`prepare` gets the run's epoch and suite by digest (from the node's cache, else fetched from
the object store), checks every file (`shipment`), and starts an `EvalHarness` on a directory
of its own: a development server that adopts the driver's epoch instead of building (the node
has the artifact, not the project's sources), installed for the suite's host. Then it checks
that the host can be launched here, with the node's own executables, credentials and
environment (what the driver's caller set explicitly is added on top, as it is for a local
run). Any failure is an answer, not an exception: the driver tells the user which node refused
and why, and runs the trials elsewhere.

`trial` runs one trial exactly as the local runner does (`run_trial` on the node's server),
on one of the actor's threads: at most `slots` at once. `close` ends the run here: the trials
still running are cut short (no record, as for an interrupted local run), the server ends every
host session it runs, and the node's directory goes (and its cache, on a Ray instance started
for the run alone). A worker process that dies instead (its
node lost) takes its host sessions with it: they are in the server's process units.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from pathlib import Path
from typing import Any

from bundle_contract._error_bases import ContractError
from bundle_server.evals.harness import BUNDLE_KEYS, EvalHarness
from bundle_server.evals.ray_runner._ray import one_line
from bundle_server.evals.ray_runner.shipment import (
    Shipment,
    artifact_problems,
    node_cache,
    private_cache,
    unpack,
)
from bundle_server.evals.suite import load_suite
from bundle_server.evals.trial import Trial, TrialEnv, run_trial
from bundle_server.project.installs import remove_tree
from bundle_server.project.prebuilt import Prebuilt

PROVENANCE_KEYS = ("epochId", *BUNDLE_KEYS)


class NodeRefused(Exception):
    """Why this node cannot run the run's trials (told to the user, naming the node)."""


class EvalNode:
    """The per-node harness of a Ray run (see the module docstring)."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.cache = node_cache(node_id)
        self._harness: EvalHarness | None = None
        self._env: TrialEnv | None = None
        self._root: Path | None = None
        self._keep_cache = True

    def prepare(self, shipment: Shipment) -> dict[str, Any]:
        """{"ok": True} once trials can run here, else {"ok": False, "why": ...}."""
        try:
            self._prepare(shipment)
        except NodeRefused as refusal:
            self.close()
            return {"ok": False, "why": str(refusal)}
        except ContractError as error:
            self.close()
            return {"ok": False, "why": f"{error.code}: {error.message}"}
        except OSError as error:
            self.close()
            return {"ok": False, "why": f"{error.strerror or error}: {error.filename or ''}"}
        except Exception as error:  # an archive that is not one, anything else: still told
            self.close()
            return {"ok": False, "why": f"{type(error).__name__}: {one_line(error)}"}
        except BaseException:
            self.close()  # nothing of a run stays on the node, whatever ends it
            raise
        return {"ok": True}

    def _prepare(self, shipment: Shipment) -> None:
        self._keep_cache = shipment.keep_cache
        private_cache(self.node_id)  # this user's alone, before anything is put in it
        prebuilt = None
        if shipment.epoch is not None and shipment.config is not None:
            prebuilt = Prebuilt(shipment.epoch, self._artifact(shipment), shipment.config)
        suite = self._suite(shipment)
        self._root = self.cache / f"run-{uuid.uuid4().hex[:12]}"
        self._root.mkdir(parents=True)
        self._harness = EvalHarness(
            self._root,
            host=shipment.host,
            host_env=shipment.host_overrides,
            host_executables=shipment.host_executables,
            model=shipment.model,
            prebuilt=prebuilt,  # None: a bare project (the without arm alone)
        )
        found = self._harness.provenance()
        differ = [k for k in PROVENANCE_KEYS if found.get(k) != shipment.provenance.get(k)]
        if differ:
            raise NodeRefused(
                f"its server adopted epoch {found['epochId']}, not the run's"
                f" {shipment.provenance.get('epochId')} ({', '.join(differ)} differ): see the"
                f" node's diagnostics"
            )
        self._check_host(shipment.host)
        self._env = self._harness.trial_env(suite, dict(shipment.provenance))

    def _artifact(self, shipment: Shipment) -> Path:
        assert shipment.epoch is not None
        digest = shipment.manifest_digest.removeprefix("sha256:")
        where = self.cache / "artifacts" / digest
        if not where.is_dir():
            unpack(_fetch(shipment.artifact), where)
        problems = artifact_problems(where, shipment.manifest_digest, shipment.epoch)
        if problems:
            remove_tree(where)  # the next run is sent a fresh copy
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise NodeRefused(
                f"its copy of epoch {shipment.epoch.get('id')} does not match the driver's:"
                f" {where}/{problems[0]}{more}; the copy was removed, and the next run sends"
                f" it again"
            )
        return where

    def _suite(self, shipment: Shipment) -> Any:
        where = self.cache / "suites" / shipment.suite_digest.removeprefix("sha256:")
        if not where.is_dir():
            unpack(_fetch(shipment.suite_archive), where)
        suite = load_suite(where / shipment.suite_file)
        if suite.digest != shipment.suite_digest:
            remove_tree(where)  # the next run is sent a fresh copy
            raise NodeRefused(
                f"its copy of the suite {where / shipment.suite_file} has digest {suite.digest},"
                f" not the driver's {shipment.suite_digest}; the copy was removed"
            )
        return suite

    def _check_host(self, host: str) -> None:
        assert self._harness is not None and self._harness.server.sessions is not None
        for entry in self._harness.server.sessions.hosts():
            if entry["host"] == host and not entry["launchable"]:
                raise NodeRefused(f"cannot launch {host} here: {entry['reason']}")

    def trial(self, case_id: str, arm: str, index: int) -> dict[str, Any]:
        """The EvalTrial record of one trial run here."""
        if self._env is None:
            raise NodeRefused("the node is not prepared")
        return run_trial(self._env, Trial(case_id, arm, index))

    def close(self) -> None:
        """End the run here: running trials are cut short, every host session ends, and the
        node's directory of this run is removed."""
        if self._env is not None:
            self._env.stopped.set()
        harness, self._harness = self._harness, None
        if harness is not None:
            with contextlib.suppress(Exception):  # closing must end everything it can
                harness.close()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
        if not self._keep_cache:
            shutil.rmtree(self.cache, ignore_errors=True)


def _fetch(box: list[Any]) -> bytes:
    """The bytes of a boxed object reference, from Ray's object store."""
    from bundle_server.evals.ray_runner._ray import import_ray

    data: bytes = import_ray().get(box[0])
    return data
