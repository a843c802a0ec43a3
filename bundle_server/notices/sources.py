"""Which published event opens or resolves which notice (pure: event in, changes out).

A notice's key names what it is about; a newer outcome of the same key resolves it (success)
or supersedes it (another failure). The sources (issue 24, item 3):

- `build.failed` opens `build`; `artifact.available` (a build succeeded) resolves it;
- `dev.host.sync` `failed` opens `host.sync:<host>`; `synced` resolves it;
- `source.status` of a project that loads: its BX4901 diagnostics (symbolic links the build
  refused to ship) open `link`; none resolve it;
- a hook trace entry (`source = hook`) of kind `failure` (the handler's answer did not apply)
  opens `hook:<host>:<event>`; a `handler.outcome` of the same host and event resolves it;
- a doctor report (DoctorReport.json, `bundle-devkit doctor`'s last for a host): each failed
  check opens `doctor:<host>:<check>`; the host's other open doctor notices are resolved (the
  check passed, warned, was skipped, or is gone).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

LINK_CODE = "BX4901"  # errors.toml LinkNotShipped
PATHS_KEPT = 20  # Notice.json details.paths maxItems
KEY_CHARS = 200  # Notice.json key maxLength


@dataclass(frozen=True)
class Report:
    key: str
    kind: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Resolve:
    key: str


Change = Report | Resolve


def _first(diagnostics: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    return diagnostics[0] if diagnostics else {}


def from_project_event(event: Mapping[str, Any]) -> list[Change]:
    """The notice changes one project event makes (none for most)."""
    kind, payload = event.get("type"), event.get("payload") or {}
    if kind == "build.failed":
        first = _first(payload.get("diagnostics", []))
        return [
            Report(
                "build",
                "build.failed",
                f"build {payload['id']} failed: {first.get('message', 'no diagnostic')}",
                {"attemptId": payload["id"][:64], "code": str(first.get("code", ""))[:64]},
            )
        ]
    if kind == "artifact.available":
        return [Resolve("build")]
    if kind == "dev.host.sync":
        key = f"host.sync:{payload['host']}"
        if payload["state"] == "synced":
            return [Resolve(key)]
        if payload["state"] == "failed":
            first = _first(payload.get("diagnostics", []))
            message = first.get("message", "the install failed")
            return [
                Report(
                    key,
                    "host.sync.failed",
                    f"{payload['host']}: {message}",
                    {
                        "host": payload["host"],
                        "epochId": payload["epochId"][:64],
                        "code": str(first.get("code", ""))[:64],
                    },
                )
            ]
        return []
    if kind == "source.status" and payload.get("state") == "ready":
        links = [d for d in payload.get("diagnostics", []) if d.get("code") == LINK_CODE]
        if not links:
            return [Resolve("link")]
        paths = sorted({str(d.get("path", "?")) for d in links})
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        return [
            Report(
                "link",
                "link.refused",
                f"{len(paths)} symbolic link(s) not shipped: {shown}",
                {"code": LINK_CODE, "paths": [p[:300] for p in paths[:PATHS_KEPT]]},
            )
        ]
    return []


def from_trace_entry(entry: Mapping[str, Any]) -> list[Change]:
    """The notice changes one trace entry makes: hook failures and their later successes."""
    if entry.get("source") != "hook":
        return []
    host = entry.get("correlation", {}).get("host", "?")
    event = entry.get("details", {}).get("family", "?")
    key = f"hook:{host}:{event}"
    if entry.get("kind") == "failure":
        error = entry.get("details", {}).get("error") or {}
        name = error.get("name") if isinstance(error, Mapping) else None
        return [
            Report(
                key,
                "hook.failed",
                f"{host} {event}: the handler did not run"
                + (f" ({name})" if isinstance(name, str) and name else "")
                + "; the host went on",
                {"host": str(host)[:64], "event": str(event)[:64]},
            )
        ]
    if entry.get("kind") == "handler.outcome":
        return [Resolve(key)]
    return []


def from_doctor_report(report: Mapping[str, Any], open_keys: Collection[str]) -> list[Change]:
    """The notice changes a host's new doctor report makes, given the open notices' keys."""
    host = str(report["host"])
    prefix = f"doctor:{host}:"
    failing = {
        (prefix + check["id"])[:KEY_CHARS]: check
        for check in report["checks"]
        if check["status"] == "fail"
    }
    changes: list[Change] = [
        Report(
            key,
            "doctor.finding",
            f"doctor, {host} {check['id']}: {check['summary']}",
            {"host": host[:64], "check": str(check["id"])[:64]},
        )
        for key, check in failing.items()
    ]
    changes.extend(
        Resolve(key) for key in sorted(open_keys) if key.startswith(prefix) and key not in failing
    )
    return changes
