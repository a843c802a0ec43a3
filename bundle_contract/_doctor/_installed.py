"""The CLI, install and trust checks: what the host itself says about the install.

The install is read from the host, never from our record alone: the record
(`<state>/published/<host>.json`) names the plugin and marketplace, and the host's own listing
command ([host.install] `list`, read as [host.doctor] `listing` says) says whether it is
installed, enabled, and where the copy it runs lives.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._bounded import run_bounded
from bundle_contract._doctor._hooks import hook_commands
from bundle_contract._doctor._report import Check
from bundle_contract._error_bases import ContractError
from bundle_contract._host_cli import cli_version
from bundle_contract._host_install import InstallPlan, install_plan
from bundle_contract._host_plugin import host_row
from bundle_contract._host_trust import host_home as trusted_home
from bundle_contract._host_trust import plugin_hooks
from bundle_contract._regular_file import read_regular_file
from bundle_contract._spec import get_spec, plain

OUTPUT_SHOWN = 300  # characters of a command's output quoted as evidence


@dataclass(frozen=True)
class Found:
    """The install as the host lists it."""

    plan: InstallPlan
    record: Mapping[str, Any]
    copy: Path | None  # the directory the host runs the plugin from
    listing: str  # the listing command's output (for checks that read it again)
    executable: str  # the host's CLI
    cwd: Path  # where the host's commands run for this install (its scope's directory)


def check_cli(host: str, env: Mapping[str, str], executable: str | None) -> Check:
    name = host_row(host)["session"]["executable"]
    if executable is None:
        return Check(
            "cli",
            "fail",
            f"{name} (the {host} CLI) is not on PATH",
            (f"PATH={env.get('PATH', '')}",),
            f"install {name} and put it on PATH",
        )
    try:
        found = cli_version(host, executable, env)
    except (OSError, subprocess.SubprocessError) as error:
        return Check("cli", "fail", f"{executable} cannot be run", (str(error),), "reinstall it")
    said = (f"{executable}", f"$ {name} --version: {found.said}")
    if found.version is None:
        return Check(
            "cli", "warn", f"{name}'s version could not be read", said, "check the CLI runs"
        )
    if not found.tested:
        tested = ", ".join(host_row(host)["session"]["tested_versions"])
        return Check(
            "cli",
            "warn",
            f"{name} {found.version} is not a version the bundle was tested with ({tested})",
            said,
            f"install {name} {tested}, or check by hand that its plugin format is unchanged",
        )
    return Check("cli", "pass", f"{name} {found.version} (a tested version)", said)


def read_record(record_file: Path) -> Mapping[str, Any] | None:
    """The install record (plugin, scope, marketplace), or None for none or a damaged one."""
    try:
        record = json.loads(
            read_regular_file(record_file, get_spec().limit("doctor-read-bytes")["maximum"])
        )
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    strings = all(isinstance(record.get(k), str) for k in ("plugin", "scope"))
    market = record.get("marketplace")
    return record if strings and (market is None or isinstance(market, str)) else None


def check_install(
    host: str,
    executable: str,
    env: Mapping[str, str],
    record: Mapping[str, Any],
    published: Path,
    project: Path,
) -> tuple[Check, Found | None]:
    """Installed and enabled, as the host's listing says, and where its copy is."""
    plan = install_plan(host, record["scope"], plugin=record["plugin"], root=str(published / host))
    doctor = plain(host_row(host)["doctor"])
    cwd = project if plan.scope == "project" else published
    cwd = cwd if cwd.is_dir() else project
    shown = " ".join([os.path.basename(executable), *plan.listing])
    seconds = get_spec().limit("attach-command-time")["maximum"] / 1000
    try:
        ran = run_bounded([executable, *plan.listing], env=env, cwd=cwd, seconds=seconds)
    except OSError as error:
        return Check("install", "fail", f"`{shown}` cannot run", (str(error),)), None
    if ran.timed_out:
        return Check("install", "fail", f"`{shown}` did not answer within {seconds:g} s"), None
    stdout = ran.stdout.decode("utf-8", "replace")
    output = stdout + ran.stderr.decode("utf-8", "replace")
    values = {"plugin": plan.plugin, "marketplace": plan.marketplace or ""}
    entry = _listed(doctor, stdout, output, values)
    evidence = [f"$ {shown}: exit status {ran.returncode}"]
    reinstall = f"bundle-devkit install {project} --host {host}"
    if entry is None:
        evidence.append(_quote(output))
        return (
            Check(
                "install", "fail", f"{host} does not list {plan.plugin}", tuple(evidence), reinstall
            ),
            None,
        )
    copy = _copy(plan, doctor, entry, values, env)
    evidence.append(f"listed: {entry['id']}, enabled: {entry['enabled']}")
    evidence.append(f"the host runs the copy at {copy}" if copy else "the copy is not found")
    found = Found(plan, record, copy, output, executable, cwd)
    if not entry["enabled"]:
        return (
            Check(
                "install",
                "fail",
                f"{plan.plugin} is installed but disabled in {host}",
                tuple(evidence),
                f"enable it in {os.path.basename(executable)}, or {reinstall}",
            ),
            found,
        )
    if copy is None or not copy.is_dir():
        return (
            Check(
                "install",
                "fail",
                f"{host} lists {plan.plugin} but its copy is missing",
                tuple(evidence),
                reinstall,
            ),
            found,
        )
    summary = f"{plan.plugin} is installed and enabled (scope {plan.scope})"
    return Check("install", "pass", summary, tuple(evidence)), found


def _listed(
    doctor: Mapping[str, Any], stdout: str, output: str, values: Mapping[str, str]
) -> dict[str, Any] | None:
    """The plugin's entry in the listing (JSON on stdout, or text on either stream): its id,
    whether enabled, its path and version."""
    listing = doctor["listing"]
    if listing["format"] == "json":
        try:
            rows: Any = json.loads(stdout)
        except ValueError:
            return None
        if "rows" in listing:
            rows = rows.get(listing["rows"], []) if isinstance(rows, dict) else []
        wanted = doctor["listed_as"].format(**values)
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get(listing["id"]) == wanted:
                return {
                    "id": wanted,
                    "enabled": row.get(listing["enabled"]) is True,
                    "path": row.get(listing.get("path", ""), None),
                    "version": row.get(listing.get("version", ""), None),
                }
        return None
    marks = tuple(listing.get("marks", ()))
    head = listing["entry"].format(**values)
    lines = [line.strip() for line in output.split("\n")]
    for index, line in enumerate(lines):
        mark = next((m for m in marks if line.startswith(m + " ")), None)
        if mark is None or not line.removeprefix(mark).lstrip().startswith(head):
            continue
        block = []
        for later in lines[index + 1 :]:
            if any(later.startswith(m + " ") for m in marks):
                break  # the next extension's block
            block.append(later)
        prefix = listing["path"]
        path = next((b.removeprefix(prefix) for b in block if b.startswith(prefix)), None)
        return {"id": line, "enabled": listing["enabled"] in block, "path": path, "version": None}
    return None


def _copy(
    plan: InstallPlan,
    doctor: Mapping[str, Any],
    entry: Mapping[str, Any],
    values: Mapping[str, str],
    env: Mapping[str, str],
) -> Path | None:
    if entry.get("path"):
        return Path(entry["path"])
    if "copy" not in doctor or not entry.get("version"):
        return None
    host_home = str(trusted_home(plan, env))
    return Path(doctor["copy"].format(**values, version=entry["version"], host_home=host_home))


def check_trust(found: Found, env: Mapping[str, str]) -> Check:
    """What the host must trust before it runs the plugin: for a host with hook trust
    ([host.install] hook_trust), each hook as the host itself lists it."""
    plan = found.plan
    if plan.hook_trust is None:
        return Check(
            "trust", "pass", "the host asks no trust of an installed plugin", (plan.trusts,)
        )
    try:
        hooks = plugin_hooks(plan, found.executable, env, found.cwd)
    except (OSError, ContractError, ValueError, KeyError, TypeError, AttributeError) as error:
        said = (
            error.message
            if isinstance(error, ContractError)
            else f"{type(error).__name__}: {error}"
        )
        return Check("trust", "fail", "the host's hook trust could not be read", (said,))
    try:
        declared = len(hook_commands(plan.host, found.copy)) if found.copy is not None else 0
    except ValueError:
        declared = 0  # an unreadable hooks document is the hooks check's finding
    if len(hooks) < declared:
        return Check(
            "trust",
            "fail",
            f"{plan.host} lists {len(hooks)} of the copy's {declared} hooks: "
            "it will not run the others",
            tuple(f"{hook.key}: listed" for hook in hooks),
            "install again; if the host still does not list them, its hooks format has changed",
        )
    evidence = [f"{hook.key}: {'trusted' if hook.trusted else 'NOT trusted'}" for hook in hooks]
    untrusted = [hook for hook in hooks if not hook.trusted]
    if untrusted:
        return Check(
            "trust",
            "fail",
            f"{len(untrusted)} of {len(hooks)} hooks are untrusted: {plan.host} will not run them",
            tuple(evidence),
            f"trust them in {os.path.basename(found.executable)}'s own review (/hooks), or install "
            "again with --trust",
        )
    return Check("trust", "pass", f"the host trusts all {len(hooks)} hooks", tuple(evidence))


def _quote(output: str) -> str:
    flat = " ".join(output.split())
    return flat if len(flat) <= OUTPUT_SHOWN else flat[: OUTPUT_SHOWN - 1] + "…"
