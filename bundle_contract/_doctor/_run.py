"""`doctor_bundle`: every check for one host, in the order a person would look."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bundle_contract._build._layout import layout
from bundle_contract._doctor._files import check_files
from bundle_contract._doctor._hooks import check_hooks
from bundle_contract._doctor._installed import (
    Found,
    check_cli,
    check_install,
    check_trust,
    read_record,
)
from bundle_contract._doctor._interpreter import check_interpreter, handler_modules
from bundle_contract._doctor._mcp import check_mcp
from bundle_contract._doctor._report import Check, DoctorReport
from bundle_contract._doctor._settings import check_settings
from bundle_contract._doctor._skills import check_skills
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import InstallBuildFailed
from bundle_contract._host_attach import plugin_name
from bundle_contract._host_install import install_row
from bundle_contract._host_plugin import host_row
from bundle_contract._install import (
    MANIFEST,
    build_result,
    host_env,
    manifest_path,
    publishable,
    record_path,
    state_published,
)
from bundle_contract._owner import process_owner
from bundle_contract._regular_file import read_regular_file
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate

# What each check needs that an earlier one may not have found.
NEEDS_COPY = ("trust", "settings", "files", "interpreter", "hooks", "mcp", "skills")


def doctor_bundle(
    project: str | os.PathLike[str],
    host: str,
    home: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> DoctorReport:
    """Whether `project`'s plugin, installed in `host`, will work, and why not: the CLI, the
    install as the host lists it, trust, the copy's files against the manifest, the
    interpreter and handler imports, each hook run with its native input, each MCP server, the
    skills. BX5101 for a host without [host.install]; AB7001 for one whose projection emits
    no plugin manifest; a project that does not build is a failed `build` check."""
    report = _diagnose(project, host, home, env)
    keep_report(report)
    return report


def keep_report(report: DoctorReport) -> None:
    """Keep `report` as the host's last (`<state>/doctor/<host>.json`, replaced atomically):
    a running server's notice ledger takes its findings from there. Best effort: a state root
    that cannot be written, or a `doctor` directory that is a link (nothing of ours is written
    through one), loses the record, never the report."""
    directory = state_published(Path(report.project)).parent / layout().doctor_reports
    data = json.dumps(report.to_json(), indent=1).encode() + b"\n"
    with contextlib.suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        if directory.is_symlink() or not directory.is_dir():
            return
        temporary = None
        try:
            with tempfile.NamedTemporaryFile(dir=directory, delete=False, suffix=".tmp") as handle:
                temporary = handle.name
                handle.write(data)
            os.replace(temporary, directory / f"{report.host}.json")
        finally:
            if temporary is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)


def _diagnose(
    project: str | os.PathLike[str],
    host: str,
    home: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
) -> DoctorReport:
    install_row(host)
    process_owner()  # made here, once, before the threads below start units in it
    root = Path(project).resolve()
    child_env = host_env(host, env, home)
    name = host_row(host)["session"]["executable"]
    executable = shutil.which(name, path=child_env.get("PATH", os.defpath))
    published = state_published(root)
    reinstall = f"bundle-devkit install {root} --host {host}"
    record = read_record(record_path(published, host))
    # The CLI's version, the fresh build and the host's listing wait on three processes:
    # asked at once.
    with (
        ThreadPoolExecutor(3) as pool,
        tempfile.TemporaryDirectory(prefix="bundle-doctor-") as scratch,
    ):
        artifact = Path(scratch) / "artifact"
        cli = pool.submit(check_cli, host, child_env, executable)
        built = pool.submit(build_result, root, artifact)
        listed = (
            pool.submit(check_install, host, executable, child_env, record, published, root)
            if executable is not None and record is not None
            else None
        )
        checks = [cli.result()]
        try:
            result = built.result()
        except InstallBuildFailed as failed:
            checks.append(Check("build", "fail", failed.message, (), "fix the build first"))
            return DoctorReport(host, str(root), tuple(checks))
        plugin = plugin_name(host, publishable(artifact, host))  # AB7001 without a manifest
        current: dict[str, Any] = json.loads((artifact / MANIFEST).read_bytes())
        found = listed.result() if listed is not None else None
    config: Mapping[str, Any] = result.get("config") or {}
    checks.append(Check("build", "pass", f"the project builds epoch {result['epoch']['id']}"))
    if executable is None:
        return DoctorReport(host, str(root), (*checks, *_skipped("the CLI is missing")))
    if found is None:
        checks.append(
            Check(
                "install",
                "fail",
                f"{plugin} is not installed into {host} by bundle-devkit",
                (f"no record at {record_path(published, host)}",),
                reinstall,
            )
        )
        return DoctorReport(host, str(root), (*checks, *_skipped("nothing is installed")))
    install, copy = found
    checks.append(install)
    if copy is None or copy.copy is None or not copy.copy.is_dir():
        return DoctorReport(host, str(root), (*checks, *_skipped("the host's copy is not found")))
    checks.extend(_copy_checks(host, copy, child_env, config, current, published, reinstall, root))
    return DoctorReport(host, str(root), tuple(checks))


def _copy_checks(
    host: str,
    found: Found,
    env: Mapping[str, str],
    config: Mapping[str, Any],
    current: Mapping[str, Any],
    published: Path,
    reinstall: str,
    project: Path,
) -> list[Check]:
    assert found.copy is not None
    copy = found.copy
    try:
        limit = get_spec().limit("doctor-read-bytes")["maximum"]
        installed = json.loads(read_regular_file(manifest_path(published, host), limit))
        validate("ArtifactManifest.json", installed)
    except (OSError, ValueError, ContractError):
        installed = None  # none kept, or damaged: the copy is compared with the fresh build
    # The interpreter probe, the hooks (one after another: they share one receipt inbox) and
    # the MCP servers run the user's code in processes of their own: side by side.
    with ThreadPoolExecutor(4) as pool:
        trust = pool.submit(check_trust, found, env)
        interpreter = pool.submit(check_interpreter, copy, handler_modules(config), env)
        declared = current.get("executables", {}).get("hooks", ())
        expected = sum(1 for hook in declared if hook.get("host") == host)
        hooks = pool.submit(check_hooks, host, copy, env, expected)
        servers = pool.submit(check_mcp, host, copy, env)
        checks = [trust.result(), check_settings(found, env, project)]
        checks.append(check_files(host, copy, installed, current, reinstall))
        checks.append(interpreter.result())
        checks.extend(hooks.result())
        checks.extend(servers.result())
    skills = check_skills(host, copy, found.plan.plugin, config.get("skills") or [], found.listing)
    if skills is not None:
        checks.append(skills)
    return checks


def _skipped(why: str) -> list[Check]:
    return [Check(check, "skip", f"not checked: {why}") for check in NEEDS_COPY]
