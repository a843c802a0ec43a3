"""The hook checks: each hook of the host's copy run as the host runs it, with its event's
native input, and the handler's receipts read back.

For every command hook in the copy's hooks document ([host.plugin] hooks_document, in the
matcher-group shape), doctor runs the command through `sh -c` in a throwaway workspace, with
the plugin root given as the host gives it (root_reference: an environment variable, or the
text substituted), the native input of its event on stdin (spec/natives/<host>/<Event>.json as
the pinned CLI sent it; else one made of hosts.toml's keys for the event), and the receipt
variables pointing at a `ReceiptInbox`. It passes when the command exits 0 within the hook's
timeout, answers nothing or a JSON object (the host's format), and its receipts say the
handler started and gave an outcome. A hook that answers without a receipt did not run its
handler: the wrapper fails open, which is exactly the silent failure doctor exists to name.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bundle_contract._bounded import run_bounded
from bundle_contract._canonical import effective_keys
from bundle_contract._doctor._receiver import ReceiptInbox
from bundle_contract._doctor._report import Check
from bundle_contract._host_plugin import host_row
from bundle_contract._regular_file import read_regular_file
from bundle_contract._spec import get_spec, plain

STDERR_SHOWN = 3  # last lines of a hook's stderr quoted as evidence


def hook_commands(host: str, copy: Path) -> list[tuple[str, str, float | None]]:
    """(native event, command, timeout in seconds or None) of each command hook in the copy's
    hooks document (none without one); ValueError for a document not in the host's shape."""
    plugin = host_row(host)["plugin"]
    limit = get_spec().limit("doctor-read-bytes")["maximum"]
    try:
        document = json.loads(read_regular_file(copy / plugin["hooks_document"], limit))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        raise ValueError(f"{plugin['hooks_document']}: {error}") from None
    scale = 1000.0 if plugin["timeout_unit"] == "ms" else 1.0
    found = []
    try:
        for native, groups in sorted(document["hooks"].items()):
            for group in groups:
                for hook in group.get("hooks", ()):
                    if hook.get("type") == "command" and isinstance(hook.get("command"), str):
                        timeout = hook.get("timeout")
                        number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
                        seconds = timeout / scale if number and timeout > 0 else None
                        found.append((native, hook["command"], seconds))
    except (AttributeError, KeyError, TypeError) as error:
        shape = f"not in the {plugin['hooks_format']} shape ({type(error).__name__}: {error})"
        raise ValueError(f"{plugin['hooks_document']}: {shape}") from None
    return found


def native_input(host: str, native: str, workspace: Path) -> tuple[dict[str, Any], bool]:
    """The event's native input, and whether it was recorded from the real CLI."""
    recorded = get_spec().root / "natives" / host / f"{native}.json"
    if recorded.is_file():
        data: dict[str, Any] = json.loads(recorded.read_text(encoding="utf-8"))
        made = False
    else:
        row = plain(host_row(host))
        event: dict[str, Any] = next((e for e in row["event"] if e["native"] == native), {})
        keys = effective_keys(row, event) if event else dict(row["common_keys"])
        data = {key: "doctor" for key in keys.values()}
        made = True
    hook_event_key = plain(host_row(host)).get("payload_keys", {}).get("hookEventName")
    if hook_event_key:
        data[hook_event_key] = native
    for canonical, value in (("cwd", str(workspace)),):
        key = plain(host_row(host))["common_keys"].get(canonical)
        if key in data:
            data[key] = value
    return data, made


def check_hooks(host: str, copy: Path, env: Mapping[str, str], expected: int) -> list[Check]:
    """One check per command hook of the copy; `expected`: how many native events the build
    hooks for this host (a copy without hooks then fails the check `hooks`)."""
    plugin = host_row(host)["plugin"]
    try:
        commands = hook_commands(host, copy)
    except ValueError as error:
        return [
            Check(
                "hooks",
                "fail",
                f"the copy's hooks document cannot be read: {error}",
                (),
                "install again",
            )
        ]
    if not commands:
        if expected:
            return [
                Check(
                    "hooks",
                    "fail",
                    f"the copy declares no hooks; the build hooks {expected} event(s)",
                    (str(copy / plugin["hooks_document"]),),
                    "install again",
                )
            ]
        return []
    inbox = ReceiptInbox()
    try:
        with tempfile.TemporaryDirectory(prefix="bundle-doctor-") as scratch:
            workspace = Path(scratch)
            checks: list[Check] = []
            for native, command, timeout in commands:
                seen = sum(1 for c in checks if c.id.split("#")[0] == f"hook:{native}")
                check_id = f"hook:{native}" + (f"#{seen + 1}" if seen else "")
                checks.append(
                    _run_hook(
                        host,
                        plugin,
                        copy,
                        env,
                        inbox,
                        workspace,
                        check_id,
                        native,
                        command,
                        timeout,
                    )
                )
            return checks
    finally:
        inbox.close()


def _run_hook(
    host: str,
    plugin: Mapping[str, Any],
    copy: Path,
    env: Mapping[str, str],
    inbox: ReceiptInbox,
    workspace: Path,
    check_id: str,
    native: str,
    command: str,
    timeout: float | None,
) -> Check:
    variable = plugin["root_variable"]
    # A token of this hook's own: a late receipt of an earlier hook is refused, not counted.
    child_env = {**env, **inbox.renew()}
    if plugin["root_reference"] == "environment":
        child_env[variable] = str(copy)
    else:
        command = command.replace("${" + variable + "}", str(copy))
    data, made = native_input(host, native, workspace)
    bound = (
        timeout if timeout is not None else get_spec().limit("doctor-hook-time")["maximum"] / 1000
    )
    try:
        ran = run_bounded(
            ["sh", "-c", command],
            env=child_env,
            cwd=workspace,
            seconds=bound,
            stdin=json.dumps(data).encode(),
            name="doctor-hook",
        )
    except OSError as error:
        return Check(check_id, "fail", f"{native} cannot be started: {error}", (f"$ {command}",))
    events = [e for r in inbox.take() for e in r.get("events", ()) if isinstance(e, dict)]
    kinds = [e.get("kind") for e in events]
    said = (
        "no timeout named: the host's default applies"
        if timeout is None
        else f"timeout {timeout:g} s"
    )
    status = "killed" if ran.timed_out else f"exit status {ran.returncode}"
    evidence = [
        f"$ {command}",
        f"input: {'made of hosts.toml keys' if made else 'recorded from the real CLI'}",
        f"{status} after {ran.seconds * 1000:.0f} ms ({said})",
        f"receipts: {', '.join(map(str, kinds)) or 'none'}",
        *(f"stderr: {line}" for line in ran.stderr_lines()[-STDERR_SHOWN:]),
    ]
    out = ran.stdout
    timed_out = ran.timed_out or (timeout is not None and ran.seconds > timeout)
    answer = out.decode("utf-8", "replace").strip()
    if answer:
        evidence.append(f"answer: {answer[:300]}")
    failure = next((e for e in events if e.get("kind") == "failure"), None)
    fix_handler = "fix the handler (the evidence says how it failed), then install again"
    if timed_out:
        return Check(
            check_id,
            "fail",
            f"{native} did not answer within {min(bound, ran.seconds):.3g} s",
            tuple(evidence),
            "make the handler faster or raise its timeout",
        )
    if ran.returncode != 0:
        return Check(
            check_id,
            "fail",
            f"{native} exited with status {ran.returncode}",
            tuple(evidence),
            "see its stderr; a hook must exit 0",
        )
    if answer:
        try:
            parsed = json.loads(answer)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return Check(
                check_id,
                "fail",
                f"{native} answered something {host} cannot read",
                tuple(evidence),
                "nothing may print to the hook's stdout but its answer",
            )
    if failure is not None:
        given = failure.get("error")
        raised = given if isinstance(given, dict) else {}
        said = f"{raised.get('name', 'error')}: {raised.get('message', '')}".strip(": ")
        reached = "handler.start" in kinds
        if made and not reached:
            return Check(
                check_id,
                "warn",
                f"{native}: no recorded input of this event; a made-up one did not reach "
                f"the handler ({said})",
                tuple(evidence),
                "run the host and trigger the event to see the handler run",
            )
        where = "the handler failed" if reached else "the handler was never called"
        return Check(
            check_id,
            "fail",
            f"{native}: {where}, and the hook let the host go on ({said})",
            tuple(evidence),
            fix_handler,
        )
    if "handler.outcome" not in kinds:
        return Check(
            check_id,
            "fail",
            f"{native}: the handler never ran (the wrapper answered without a receipt)",
            tuple(evidence),
            "check the interpreter the plugin names (libexec/python) has bundle_contract",
        )
    outcome = next(e.get("outcome") for e in events if e.get("kind") == "handler.outcome")
    return Check(
        check_id, "pass", f"{native}: the handler ran and answered {outcome}", tuple(evidence)
    )
