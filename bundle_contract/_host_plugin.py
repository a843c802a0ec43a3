"""A host's plugin directory: its documents and its hook wrappers.

    >>> app = {"id": "demo", "name": "Demo", "version": "1.0.0"}
    >>> files = plugin_files("host_a", application=app,
    ...                      hooks=[("PreToolUse", "hooks/PreToolUse", 10)], mcp_servers={})
    >>> sorted(files)
    ['.claude-plugin/plugin.json', 'hooks/hooks.json']
    >>> hook_command("host_a", "hooks/PreToolUse")
    'sh "${CLAUDE_PLUGIN_ROOT}"/hooks/PreToolUse'

Everything host-specific comes from hosts.toml `[host.plugin]`: document paths, the hooks
document's shape (one of HOOK_FORMATS, a small named set), the unit of its timeouts, the MCP
document (which may be the manifest itself), and how hook commands and MCP entries reach the
plugin root (`root_variable`, `root_reference`, `mcp_reference`). A hook command is
`sh "${VARIABLE}"/<wrapper path>`: quoted, so that a plugin root with spaces stays one word
under `sh -c`. How a session is given the plugin is `_host_attach`'s (hosts.toml
`[host.attach]`); `plugin_args` gives only that row's arguments.

`wrapper_source` writes the text of one generated wrapper script; the build writes it
executable at `<plugin dir>/<wrapper path>`, and the hooks document runs it through sh
(`sh "${VAR}"/hooks/X`), so a copy of the plugin that lost its file modes still runs its hooks.
It starts Python with `-I` (no PYTHON* variables, no user site, no script directory on
sys.path), finds the plugin root from its own location and calls
`bundle_contract._hook_runtime.run`. In a built plugin the interpreter is the plugin's own
`interpreter_source` script (runtime.toml [artifact] interpreter), named relative to the
wrapper, so the plugin names the machine's Python in one file and works wherever it is copied.
The wrapper's first lines are an sh/Python polyglot: sh execs the interpreter on the wrapper,
in a line Python reads as a string (`${0%/*}` is the wrapper's directory, found without a
fork).

This module runs at build time: it reads the loaded spec, never at hook time.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bundle_contract._spec import Spec, get_spec, plain, row_label

__all__ = [
    "HOOK_FORMATS",
    "batch_args",
    "hook_command",
    "hook_format_problems",
    "interpreter_source",
    "mcp_roots",
    "payload_gaps",
    "plugin_args",
    "plugin_files",
    "wrapper_source",
]

PLUGIN_DIR_TOKEN = "{plugin_dir}"
PROMPT_TOKEN = "{prompt}"
# Characters that would end or expand the double-quoted interpreter path of the polyglot line.
POLYGLOT_REFUSED = ('"', "$", "`", "\\", "\n", "\r", "\0")

HookEntry = tuple[str, str, float | None]  # (native event, plugin-relative wrapper, timeout s)


def host_row(host: str, spec: Spec | None = None) -> Any:
    """The hosts.toml row of one host kind; ValueError naming the known kinds otherwise."""
    spec = spec if spec is not None else get_spec()
    for row in spec.rows("hosts", "host"):
        if row["kind"] == host:
            return row
    kinds = ", ".join(row["kind"] for row in spec.rows("hosts", "host"))
    raise ValueError(f"unknown host kind {host!r}; hosts.toml knows {kinds}")


def payload_gaps(host: str, event: str) -> list[str]:
    """Required payload fields of `event` that `host` never sends (no native key serves them),
    so that every call of such a handler fails to decode; empty when the host can serve it.

    A build can refuse or warn about a handler on such a host before any hook runs.
    """
    from bundle_contract._hook_runtime import BINDINGS  # the generated table, typed

    spec = get_spec()
    host_row(host, spec)
    row = next((e for e in spec.rows("hooks", "event") if e["name"] == event), None)
    if row is None:
        raise ValueError(f"unknown handler event {event!r}")
    served = BINDINGS.get(host, {}).get(event)
    if served is None:
        raise ValueError(f"{host} has no native event for {event} ({row['family']})")
    from bundle_contract._derived import unsent_fields

    present = {name for name, _key, _step in served[2]}
    absent_ok = unsent_fields(spec).get(event, ())
    required = [f["name"] for f in spec.rows("hooks", "common_field") if f["required"]]
    required += [f["name"] for f in row["required"] if f["name"] not in absent_ok]
    return [name for name in required if name not in present]


def plugin_args(host: str, plugin_dir: str | os.PathLike[str]) -> list[str]:
    """The arguments a session host gets with `plugin_dir` attached (hosts.toml [host.attach]
    args; a host that loads plugins from its home needs more: `_host_attach.attach_plan`)."""
    row = host_row(host)
    if "attach" not in row:
        raise ValueError(f"{host} is not a session host: hosts.toml gives it no [host.attach]")
    path = os.fspath(plugin_dir)
    return [arg.replace(PLUGIN_DIR_TOKEN, path) for arg in row["attach"].get("args", ())]


def batch_args(host: str, prompt: str) -> list[str]:
    """The arguments that run `prompt` in the host's non-interactive mode (hosts.toml
    [host.batch] args); each is one argv word, so the prompt needs no quoting."""
    row = host_row(host)
    if "batch" not in row:
        raise ValueError(f"{host} has no non-interactive mode: hosts.toml gives it no [host.batch]")
    return [arg.replace(PROMPT_TOKEN, prompt) for arg in row["batch"]["args"]]


def root_placeholder(host: str) -> str:
    """`${VAR}`: how the host's documents name the plugin root (hosts.toml root_variable)."""
    variable: str = host_row(host)["plugin"]["root_variable"]
    return "${" + variable + "}"


def mcp_roots(host: str) -> tuple[str, str | None]:
    """(how the host's MCP document names the plugin root, the entry's cwd or None).

    `substituted`: `${VARIABLE}`, which the host replaces in the entry's strings; `cwd`: the
    host replaces nothing and starts the server in the plugin root, so paths are `./...` and
    the entry says `"cwd": "."` (hosts.toml mcp_reference).
    """
    plugin = host_row(host)["plugin"]
    if plugin["mcp_reference"] == "cwd":
        return ".", "."
    return root_placeholder(host), None


def hook_command(host: str, wrapper: str) -> str:
    """The command a hooks document runs for `wrapper` (a plugin-relative path): through sh,
    so that a copy of the plugin that lost its file modes (an unzip) still runs its hooks."""
    quoted = f'"{root_placeholder(host)}"'  # a plugin root with spaces stays one word
    return "sh " + quoted + shlex.quote("/" + _relative(wrapper, "wrapper path"))


def named_wrappers(host: str, document: bytes) -> list[str]:
    """The plugin-relative wrapper paths a hooks document's commands run, in document order:
    `hook_command` read backwards, so a check can hold what the host reads to what was meant."""
    prefix = f'sh "{root_placeholder(host)}"'
    named: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            command = value.get("command")
            if isinstance(command, str) and command.startswith(prefix):
                words = shlex.split(command[len(prefix) :])
                if words:
                    named.append(words[0].lstrip("/"))
            for member in value.values():
                walk(member)
        elif isinstance(value, list):
            for member in value:
                walk(member)

    walk(json.loads(document))
    return named


def plugin_files(
    host: str,
    *,
    application: Mapping[str, Any],
    hooks: Sequence[HookEntry],
    mcp_servers: Mapping[str, Mapping[str, Any]],
) -> dict[str, bytes]:
    """The host's plugin documents: plugin-relative path -> bytes (UTF-8 JSON).

    `application` is {id, name, version, description?}; `hooks` lists (native event,
    plugin-relative wrapper path, timeout in seconds or None) in order; `mcp_servers` maps a
    server name to its already-resolved launch entry. The hooks document is written only when
    there are hooks, the MCP document only when there are servers (unless it is the manifest).
    """
    row = host_row(host)
    plugin = row["plugin"]
    natives = {event["native"] for event in row["event"] if "not_sent" not in event}
    for key in ("id", "name", "version"):
        if not isinstance(application.get(key), str) or not application[key]:
            raise ValueError(f"application {key!r} must be a non-empty string")
    documents: dict[str, dict[str, Any]] = {plugin["manifest"]: _manifest(plugin, application)}
    if hooks:
        entries: dict[str, list[dict[str, Any]]] = {}
        for native, wrapper, timeout in hooks:
            if native not in natives:
                raise ValueError(f"{host} has no native event {native!r} in hosts.toml")
            entry: dict[str, Any] = {"command": hook_command(host, wrapper)}
            if timeout is not None:
                entry["timeout"] = _timeout(timeout, plugin["timeout_unit"])
            entries.setdefault(native, []).append(entry)
        documents[plugin["hooks_document"]] = HOOK_FORMATS[plugin["hooks_format"]](entries)
    if mcp_servers:
        target = documents.setdefault(plugin["mcp_document"], {})
        target[plugin["mcp_key"]] = {name: plain_json(e) for name, e in mcp_servers.items()}
    return {
        path: (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
        for path, document in documents.items()
    }


def plain_json(value: Any) -> Any:
    """A launch entry as plain JSON data (mappings and sequences copied)."""
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return value


def _manifest(plugin: Any, application: Mapping[str, Any]) -> dict[str, Any]:
    manifest: dict[str, Any] = {}
    for path, placeholder in plain(plugin["manifest_fields"]).items():
        value = application.get(placeholder.removeprefix("$"))
        if value is None:
            continue  # an optional field the application does not have
        target = manifest
        *parents, last = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
    return manifest


def _timeout(seconds: float, unit: str) -> int | float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"a hook timeout is a positive number of seconds, not {seconds!r}")
    value = seconds * 1000 if unit == "ms" else seconds
    return int(value) if float(value).is_integer() else value


def _relative(path: str, what: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{what} {path!r} must be a relative path without . or .. parts")
    if any(c in path for c in "\0\n\r"):
        raise ValueError(f"{what} {path!r} holds a control character")
    return path


def _matcher_groups(entries: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """`{"hooks": {event: [{"matcher": "*", "hooks": [{"type": "command", ...}]}]}}`."""
    return {
        "hooks": {
            native: [{"matcher": "*", "hooks": [{"type": "command", **e} for e in commands]}]
            for native, commands in entries.items()
        }
    }


def _flat(entries: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """`{"version": 1, "hooks": {event: [{"command": ..., "timeout": ...}]}}`."""
    return {"version": 1, "hooks": {native: list(commands) for native, commands in entries.items()}}


# The document shapes hosts.toml `hooks_format` names; a spec check keeps the two in step.
HOOK_FORMATS: Mapping[str, Callable[[Mapping[str, list[dict[str, Any]]]], dict[str, Any]]] = {
    "matcher-groups": _matcher_groups,
    "flat": _flat,
}


def hook_format_problems(spec: Spec) -> list[str]:
    """One line per host whose hooks_format has no implementation here."""
    return [
        f"{row_label('hosts', 'host', index, row)}: plugin: hooks_format "
        f"{row['plugin']['hooks_format']!r} has no implementation"
        for index, row in enumerate(spec.rows("hosts", "host"))
        if row["plugin"]["hooks_format"] not in HOOK_FORMATS
    ]


# --------------------------------------------------------------------------------------------
# Wrapper scripts


def wrapper_source(
    *,
    python: str,
    host: str,
    native: str,
    event: str,
    handler: str,
    timeout: float | None,
    root_from_wrapper: str,
) -> str:
    """The text of one executable hook wrapper for `handler` serving `event` on `host`.

    `python` is the interpreter (bundle_contract importable there): an absolute path, or a
    path relative to the wrapper's directory (a built plugin's `interpreter_source` script,
    e.g. "../libexec/python"); `root_from_wrapper` the relative path from the wrapper's directory
    to the root holding `src/`, e.g. ".."; `timeout` the hook's native timeout in seconds, or
    None when the hooks document declares none. Raises ValueError for anything the wrapper
    could not honour.
    """
    spec = get_spec()
    row = host_row(host, spec)
    family = next((e["family"] for e in spec.rows("hooks", "event") if e["name"] == event), None)
    if family is None:
        raise ValueError(f"unknown handler event {event!r}")
    served = next((e["native"] for e in row["event"] if e["family"] == family), None)
    if served != native:
        raise ValueError(f"{host} serves {event} ({family}) with {served!r}, not {native!r}")
    module, colon, function = handler.partition(":")
    if (
        not colon
        or not function.isidentifier()
        or not all(part.isidentifier() for part in module.split("."))
    ):
        raise ValueError(f"handler {handler!r} is not a module:function reference")
    if timeout is not None:
        _timeout(timeout, "s")
    if root_from_wrapper != ".":
        _relative(root_from_wrapper.replace("..", "up"), "root_from_wrapper")
    call = (
        f"run(root, host={host!r}, native={native!r}, event={event!r}, "
        f"handler={handler!r}, timeout={timeout!r})"
    )
    return "\n".join(
        [
            *_launch_lines(python),
            f"# Generated by bundle-devkit: the {event} hook of {host} ({native}). Do not edit.",
            "import os",
            "import sys",
            "",
            "root = os.path.normpath(",
            f"    os.path.join(os.path.dirname(os.path.realpath(__file__)), {root_from_wrapper!r})",
            ")",
            "try:",
            "    from bundle_contract._hook_runtime import run",
            "except BaseException as exc:  # bundle_contract left this interpreter: never fail",
            "    sys.stderr.write(",
            '        f"bundle hook {__file__}: cannot load bundle_contract "',
            '        f"({type(exc).__name__}); the hook continues\\n"',
            "    )",
            "    sys.stderr.flush()",
            "    os._exit(0)",
            "try:",
            f"    status = {call}",
            "except BaseException:  # run never raises; if it ever does, the hook still continues",
            "    status = 0",
            "os._exit(status)",
            "",
        ]
    )


def _launch_lines(python: str) -> list[str]:
    """The sh/Python polyglot that starts the wrapper's Python. Hooks documents run wrappers
    through sh (`hook_command`), so the first line is sh's, never a `#!` for Python: a copy
    that lost its modes, or an interpreter path a `#!` line cannot hold (spaces, over 127
    bytes on older kernels), changes nothing."""
    if any(c in python for c in POLYGLOT_REFUSED) or "'''" in python:
        raise ValueError(f"the interpreter path {python!r} cannot be quoted for /bin/sh")
    if os.path.isabs(python):
        target = f'"{python}"'
    else:
        # The plugin's own interpreter script, found from the wrapper's path ($0), run by sh
        # (it needs no execute bit either).
        _relative(python.replace("..", "up"), "the interpreter path")
        target = f'sh "${{0%/*}}/{python}"'
    # sh reads `''''exec ... -I "$0" "$@"` (empty strings, then exec) and never reaches the
    # comment; Python reads the line as one string literal: ''' + 'exec ... # ' + '''.
    return ["#!/bin/sh", f"''''exec {target} -I \"$0\" \"$@\" # '''"]


def interpreter_source(python: str) -> str:
    """The plugin's interpreter script: the one file of a plugin naming the machine's Python
    (absolute, with bundle_contract and the bundle's imports installed), so that a release
    build can name another without touching a wrapper or a document."""
    if not os.path.isabs(python) or any(c in python for c in "\0\n\r"):
        raise ValueError(f"the interpreter path {python!r} must be absolute, on one line")
    return (
        "#!/bin/sh\n"
        "# Generated by bundle-devkit: the Python this plugin's hooks and MCP servers run.\n"
        f'exec {shlex.quote(python)} "$@"\n'
    )
