"""The settings check: the host's own settings that stop it running the plugin's hooks.

Doctor runs each hook itself, so a host that will not run them at all still looks healthy
there. hosts.toml [host.doctor.hooks_off] names the switches that say so, each a key of a
settings file, in the user's home of the host (as the host resolves it) or in the project:

- `off_when`: a value that turns every hook off. The host merges its files, the later winning:
  the switches are listed from the lowest precedence to the highest, and the last whose file
  sets its key decides. A value of another type (1 for true) is not that value.
- `lists`: a list of the names of hooks the host does not run, added up over the files; a hook
  is named by its `name`, else by its command with the plugin root filled in as the host
  fills it.
- `per_hook`: a table with an entry per hook under the host's own key for it; the plugin's
  entries (their names start with `entry`) whose `field` is `off_when` turn those hooks off.

The check fails naming each file, key and value that turns the plugin's hooks off, and what to
change; it passes with every file read (or absent) as its evidence.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._doctor._installed import Found
from bundle_contract._doctor._report import Check
from bundle_contract._host_attach import _fill
from bundle_contract._host_plugin import host_row
from bundle_contract._host_trust import host_home
from bundle_contract._spec import plain

_UNSET = object()  # a key the file does not set


@dataclass(frozen=True)
class _File:
    """One settings file as read: its document, or None when absent or unreadable."""

    path: Path
    document: Mapping[str, Any] | None
    problem: str | None = None  # why an existing file could not be read


def check_settings(found: Found, env: Mapping[str, str], project: Path) -> Check:
    """Whether the host's settings (the user's and the project's) turn the plugin's hooks off."""
    plan = found.plan
    spec = plain(host_row(plan.host)["doctor"]).get("hooks_off")
    if not spec:
        return Check("settings", "pass", f"{plan.host} has no known setting that turns hooks off")
    roots = {"user": host_home(plan, env), "project": project}
    paths = [roots[s["scope"]] / s["file"] for s in spec["switches"]]
    files = {path: _read(path) for path in dict.fromkeys(paths)}  # each file read once
    read = [
        (s, files[path], _get(files[path].document, s["key"]))
        for s, path in zip(spec["switches"], paths, strict=True)
    ]
    # Of the switches for every hook, the last whose file sets its key decides.
    chain = [i for i, (s, _, value) in enumerate(read) if "off_when" in s and value is not _UNSET]
    deciding = chain[-1] if chain else None
    names = dict(_hook_names(plan.host, found.copy)) if found.copy is not None else {}
    values = {"plugin": plan.plugin, "marketplace": plan.marketplace or ""}
    evidence: list[str] = []
    offs: list[str] = []  # what turns hooks off, in words
    fixes: list[str] = []
    shown: set[Path] = set()
    for index, (switch, file, value) in enumerate(read):
        key, where = switch["key"], file.path
        if file.document is None:
            if where not in shown:
                state = f"not read: {file.problem}" if file.problem else "absent"
                evidence.append(f"{where}: {state}")
                shown.add(where)
            continue
        if value is _UNSET:
            evidence.append(f"{where}: {key} not set")
        elif "off_when" in switch:
            said = f"{where}: {key} = {_shown(value)}"
            if index == deciding:
                off = _same(value, switch["off_when"])
                said += f" (this decides: {plan.host} runs {'no hooks' if off else 'hooks'})"
                if off:
                    offs.append(f"{key} = {_shown(value)} in {where}")
                    turning: dict[str, dict[str, None]] = {}  # key -> files setting it off
                    for s, f, v in read:
                        if "off_when" in s and _same(v, s["off_when"]):
                            turning.setdefault(s["key"], {})[str(f.path)] = None
                    parts = [f"{k} from {' and '.join(paths)}" for k, paths in turning.items()]
                    fixes.append("remove " + ", and ".join(parts))
            evidence.append(said)
        elif "lists" in switch:
            listed = {n for n in value if isinstance(n, str)} if isinstance(value, list) else set()
            ours = [(name, native) for name, native in names.items() if name in listed]
            for name, native in ours:
                evidence.append(f"{where}: {key} lists {name!r} ({native})")
                offs.append(f"{key} lists its {native} hook in {where}")
            if ours:
                fixes.append(f"take the plugin's hooks out of {key} in {where}")
            else:
                evidence.append(f"{where}: {key} lists none of the plugin's hooks")
        else:
            per_hook = switch["per_hook"]
            prefix, field = _fill(per_hook["entry"], values), per_hook["field"]
            entries = value if isinstance(value, dict) else {}
            turned = [
                name
                for name, entry in sorted(entries.items())
                if name.startswith(prefix)
                and isinstance(entry, dict)
                and _same(entry.get(field, _UNSET), per_hook["off_when"])
            ]
            for name in turned:
                said = f'{key}."{name}".{field} = {_shown(per_hook["off_when"])}'
                evidence.append(f"{where}: {said}")
                offs.append(f"{said} in {where}")
            if turned:
                fixes.append(f"remove {field} from the plugin's entries of [{key}] in {where}")
            else:
                evidence.append(f"{where}: no entry of {key} turns off a hook of the plugin")
    if offs:
        return Check(
            "settings",
            "fail",
            f"{plan.host}'s settings turn {plan.plugin}'s hooks off: {'; '.join(offs)}",
            tuple(evidence),
            "; ".join(fixes),
        )
    unread = sorted({str(f.path) for _, f, _ in read if f.problem})
    if unread:
        return Check(
            "settings",
            "warn",
            f"{plan.host}'s settings could not all be read: whether they turn hooks off is not "
            "known",
            tuple(evidence),
            f"make {' and '.join(unread)} well-formed",
        )
    return Check(
        "settings",
        "pass",
        f"no setting of {plan.host} read turns {plan.plugin}'s hooks off",
        tuple(evidence),
    )


def _hook_names(host: str, copy: Path) -> Iterator[tuple[str, str]]:
    """(name, native event) of each command hook in the copy, named as the host names it in a
    list of disabled hooks: its `name`, else its command with the plugin root filled in."""
    plugin = host_row(host)["plugin"]
    try:
        document = json.loads((copy / plugin["hooks_document"]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the files check names a missing or broken hooks document
    hooks = document.get("hooks") if isinstance(document, dict) else None
    for native, groups in sorted(hooks.items() if isinstance(hooks, dict) else ()):
        for group in groups if isinstance(groups, list) else ():
            for hook in group.get("hooks", ()) if isinstance(group, dict) else ():
                if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
                    continue
                command: str = hook["command"]
                if plugin["root_reference"] == "substituted":
                    command = command.replace("${" + plugin["root_variable"] + "}", str(copy))
                name = hook.get("name")
                yield (name if isinstance(name, str) and name else command), native


def _read(path: Path) -> _File:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _File(path, None)
    except (OSError, UnicodeDecodeError) as error:
        return _File(path, None, str(error))
    try:
        document = tomllib.loads(text) if path.suffix == ".toml" else _json(text)
    except ValueError as error:
        return _File(path, None, f"{type(error).__name__}: {error}")
    if not isinstance(document, dict):
        return _File(path, None, "not an object")
    return _File(path, document)


def _json(text: str) -> Any:
    """JSON, with // and /* */ comments allowed (as the hosts read their settings)."""
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(_without_comments(text))


def _without_comments(text: str) -> str:
    out: list[str] = []
    index, inside = 0, False
    while index < len(text):
        char = text[index]
        if inside:
            out.append(char)
            if char == "\\":
                out.append(text[index + 1 : index + 2])
                index += 1
            elif char == '"':
                inside = False
        elif char == '"':
            inside = True
            out.append(char)
        elif text.startswith("//", index):
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            index = len(text) if end < 0 else end + 2
            out.append(" ")
            continue
        else:
            out.append(char)
        index += 1
    return "".join(out)


def _get(document: Mapping[str, Any] | None, key: str) -> Any:
    node: Any = document
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _UNSET
        node = node[part]
    return node


def _same(value: Any, wanted: Any) -> bool:
    """`value` is `wanted`, type and all: 1 is not true, nor "false" false."""
    return type(value) is type(wanted) and value == wanted


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
