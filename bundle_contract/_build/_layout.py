"""Where a project keeps what, read once from spec/runtime.toml ([project], [artifact], [state]).

One frozen `Layout` so the build, the watcher and the server agree on the config file names,
the ignored directories, the artifact's own layout and the state root without restating them.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bundle_contract._spec import get_spec, plain


@dataclass(frozen=True)
class Layout:
    config_files: tuple[str, ...]
    ignored_directories: frozenset[str]
    ignored_suffixes: tuple[str, ...]
    ignored_prefixes: tuple[str, ...]
    sources: str  # inside the artifact root: the project's modules
    skills: str  # inside a plugin directory: one directory per skill
    plugins: str  # inside the artifact root: "hosts/{host}"
    wrappers: str  # inside a plugin directory: the generated hook wrappers
    mcp_launchers: str  # inside the artifact root: generated compiled-server launchers
    interpreter: str  # inside a plugin directory: the script naming the machine's Python
    default_out: str  # inside the project: where `bundle-build` writes without --out
    skill_document: str  # the file a skill directory must hold
    state_default: str
    state_per_project: str
    epochs: str
    installs: str
    published: str  # inside the state directory: what `bundle-devkit install` installed
    epoch_prefix: str
    epoch_digest_chars: int
    digest_cache: str  # inside the state directory
    session_ledger: str  # inside the state directory: one record per spawned host session
    process_records: str  # inside the state directory: one record per process unit (fallback)
    notice_journal: str  # inside the state directory: the notice ledger's journal
    doctor_reports: str  # inside the state directory: each host's last doctor report
    eval_node_cache: str  # under the temporary directory: a Ray node's cache, one per user
    state_variable: str

    def epoch_id(self, manifest_sha256: str) -> str:
        """The id of the epoch whose bundle.manifest.json has this sha256 (hex, or
        "sha256:<hex>"): the same content is the same epoch."""
        return self.epoch_prefix + manifest_sha256.removeprefix("sha256:")[: self.epoch_digest_chars]

    def plugin_dir(self, host: str) -> str:
        """The artifact-relative plugin directory of one host kind, e.g. `hosts/host_a`."""
        return self.plugins.format(host=host)

    def ignored(self, relative: str) -> bool:
        """Whether a project-relative POSIX path is never a bundle source."""
        parts = relative.split("/")
        if any(part in self.ignored_directories for part in parts[:-1]):
            return True
        name = parts[-1]
        return (
            name in self.ignored_directories
            or name.endswith(self.ignored_suffixes)
            or name.startswith(self.ignored_prefixes)
        )

    def epoch_name(self, name: str) -> bool:
        """Whether a directory name is an epoch's (what pruning may ever remove)."""
        digest = name.removeprefix(self.epoch_prefix)
        return (
            name.startswith(self.epoch_prefix)
            and len(digest) == self.epoch_digest_chars
            and all(c in "0123456789abcdef" for c in digest)
        )

    def state_dir(self, project_root: Path, environ: os._Environ[str] | dict[str, str]) -> Path:
        """The project's state directory: BUNDLE_STATE_ROOT/<name>-<digest>, else
        <project>/.bundle/state (runtime.toml [state])."""
        override = environ.get(self.state_variable)
        if not override:
            return project_root / self.state_default
        digest = hashlib.sha256(os.fsencode(project_root)).hexdigest()[:12]
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", project_root.name).strip("-.") or "project"
        return Path(override) / self.state_per_project.format(name=name[:40], digest=digest)


@cache
def layout() -> Layout:
    """The layout of spec/runtime.toml."""
    spec = get_spec()
    runtime = plain(spec.tables["runtime"])
    project, artifact, state = runtime["project"], runtime["artifact"], runtime["state"]
    return Layout(
        config_files=tuple(project["config_files"]),
        ignored_directories=frozenset(project["ignored_directories"]),
        ignored_suffixes=tuple(project["ignored_suffixes"]),
        ignored_prefixes=tuple(project["ignored_prefixes"]),
        sources=artifact["sources"],
        skills=artifact["skills"],
        plugins=artifact["plugins"],
        wrappers=artifact["wrappers"],
        mcp_launchers=artifact["mcp_launchers"],
        interpreter=artifact["interpreter"],
        default_out=artifact["default_out"],
        skill_document=artifact["skill_document"],
        state_default=state["default"],
        state_per_project=state["per_project"],
        epochs=state["epochs"],
        installs=state["installs"],
        published=state["published"],
        epoch_prefix=state["epoch_prefix"],
        epoch_digest_chars=state["epoch_digest_chars"],
        digest_cache=state["digest_cache"],
        session_ledger=state["session_ledger"],
        process_records=state["process_records"],
        notice_journal=state["notice_journal"],
        doctor_reports=state["doctor_reports"],
        eval_node_cache=state["eval_node_cache"],
        state_variable=spec.variable("state-root"),
    )
