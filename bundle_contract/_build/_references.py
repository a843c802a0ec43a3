"""Checking the config's `module:attribute` references against the project's code.

Hook handlers, routes and their providers are imported, as the hook wrapper and route workers
will import them: a syntax error, an import error or a missing function fails the build that
would ship it, with the file and line. Compiled MCP servers are checked without running them
(their module is parsed, and the name must be bound at its top level): importing one would load
its MCP SDK into every build, and the server's own process reports its import errors when it
is launched. Both run the project's code or read it, so this runs in a build process only,
inside `project_imports`.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import os
import posixpath
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from bundle_contract._build._diagnostics import describe, project_location, syntax_location
from bundle_contract._build._layout import layout
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import ConfigInvalid, HandlerUnresolved, SkillInvalid


@contextlib.contextmanager
def project_imports(root: Path) -> Iterator[None]:
    """Import the project's modules fresh, and forget them afterwards.

    A build process usually runs one build, but `build_project` may be called again in the
    same process (tests, tools): modules of an earlier project, or an earlier state of this
    one, must not answer for the project's names. The project's root is put first on
    sys.path, every module it can provide is dropped from sys.modules, and on the way out
    both are restored.
    """
    saved_path = list(sys.path)
    saved_modules = dict(sys.modules)
    provided = {path.stem for path in root.glob("*.py")} | {
        path.parent.name for path in root.glob("*/__init__.py")
    }
    for name in list(sys.modules):
        if name.partition(".")[0] in provided:
            del sys.modules[name]
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for name in list(sys.modules):
            if name not in saved_modules:
                del sys.modules[name]
        sys.modules.update(saved_modules)


def hook_handlers(config: dict[str, Any]) -> Iterator[tuple[str, str, float | None]]:
    """(handler event, reference, timeout seconds or None) for every configured hook."""
    for event, binding in sorted(config.get("hooks", {}).items()):
        if isinstance(binding, str):
            yield event, binding, None
        else:
            yield event, binding["handler"], binding.get("timeout")


def check_config(
    root: Path, config: dict[str, Any], config_name: str, shipped: frozenset[str]
) -> list[ContractError]:
    """Every problem of the config's references, duplicates and skills, in config order.

    `shipped` are the project-relative files the build staged: a module, a SKILL.md or a
    prebuilt entry must be one of them, not merely importable or present (a symbolic link is
    found by the import system, but never ships).
    """
    found: list[ContractError] = []
    found += _duplicates(config, config_name)
    broken: set[str] = set()  # modules already reported: one import error is one problem

    def imported(reference: str, where: str) -> list[ContractError]:
        module = reference.partition(":")[0]
        if module in broken:
            return []
        problems = _imported(root, reference, where, shipped)
        if problems and isinstance(problems[0].details.get("line"), int):
            broken.add(module)
        return problems

    for event, reference, _ in hook_handlers(config):
        found += imported(reference, f"{config_name}: hooks.{event}")
    for index, route in enumerate(config.get("routes", [])):
        found += imported(route["handler"], f"{config_name}: routes[{index}].handler")
        for position, provider in enumerate(route.get("providers", [])):
            found += imported(provider, f"{config_name}: routes[{index}].providers[{position}]")
        found += _input_schema(route, f"{config_name}: routes[{index}].inputSchema", config_name)
    for index, server in enumerate(config.get("mcpServers", [])):
        if server["kind"] == "compiled":
            where = f"{config_name}: mcpServers[{index}].server"
            found += _bound(root, server["server"], where, shipped)
    found += _skills(root, config, config_name, shipped)
    found += _prebuilts(root, config, config_name, shipped)
    return found


def module_file(root: Path, module: str, shipped: frozenset[str]) -> Path | None:
    """The shipped project file defining dotted `module`, without importing it."""
    base = "/".join(module.split("."))
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in shipped:
            return root / candidate
    return None


def _no_module(where: str, reference: str, module_name: str) -> HandlerUnresolved:
    return HandlerUnresolved(
        f"{where}: {reference}: no module {module_name!r} among the project's files (a"
        " symbolic link is not one: links are never shipped)"
    )


def _imported(
    root: Path, reference: str, where: str, shipped: frozenset[str]
) -> list[ContractError]:
    module_name, _, attribute = reference.partition(":")
    if module_file(root, module_name, shipped) is None:
        return [_no_module(where, reference, module_name)]
    try:
        module = importlib.import_module(module_name)
    except SyntaxError as error:
        file, line = syntax_location(root, error) or (reference, error.lineno or 1)
        return [
            HandlerUnresolved(
                f"{file}:{line}: SyntaxError: {error.msg} (imported for {where})",
                {"path": file, "line": line},
            )
        ]
    except BaseException as error:  # noqa: BLE001 - the project's import-time code
        if isinstance(error, KeyboardInterrupt):
            raise
        location = project_location(root, error.__traceback__)
        if location is None:
            return [HandlerUnresolved(f"{where}: {reference}: {describe(error)}")]
        file, line = location
        return [
            HandlerUnresolved(
                f"{file}:{line}: {describe(error)} (imported for {where})",
                {"path": file, "line": line},
            )
        ]
    origin = getattr(module, "__file__", None)
    if origin is None or not Path(origin).resolve().is_relative_to(root.resolve()):
        return [
            HandlerUnresolved(
                f"{where}: {reference}: {module_name!r} is not a module of the project"
            )
        ]
    target = getattr(module, attribute, None)
    if target is None:
        relative = Path(origin).resolve().relative_to(root.resolve()).as_posix()
        return [
            HandlerUnresolved(
                f"{where}: {reference}: {relative} defines no {attribute!r}",
                {"path": relative},
            )
        ]
    if not callable(target):
        return [HandlerUnresolved(f"{where}: {reference}: {attribute!r} is not callable")]
    return []


def _bound(root: Path, reference: str, where: str, shipped: frozenset[str]) -> list[ContractError]:
    module_name, _, attribute = reference.partition(":")
    path = module_file(root, module_name, shipped)
    if path is None:
        return [_no_module(where, reference, module_name)]
    relative = path.relative_to(root).as_posix()
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as error:
        line = error.lineno or 1
        return [
            HandlerUnresolved(
                f"{relative}:{line}: SyntaxError: {error.msg} (read for {where})",
                {"path": relative, "line": line},
            )
        ]
    except (OSError, ValueError) as error:
        return [HandlerUnresolved(f"{where}: {reference}: {relative} cannot be read: {error}")]
    if attribute not in _top_level_names(tree):
        return [
            HandlerUnresolved(
                f"{where}: {reference}: {relative} binds no {attribute!r} at its top level",
                {"path": relative},
            )
        ]
    return []


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _skills(
    root: Path, config: dict[str, Any], config_name: str, shipped: frozenset[str]
) -> list[ContractError]:
    found: list[ContractError] = []
    for index, skill in enumerate(config.get("skills", [])):
        where = f"{config_name}: skills[{index}] ({skill['name']})"
        directory = skill.get("directory")
        if directory is None:
            if not skill.get("instructions"):
                found.append(SkillInvalid(f"{where}: neither a directory nor instructions"))
            continue
        if skill.get("instructions"):
            found.append(SkillInvalid(f"{where}: both a directory and instructions; keep one"))
            continue
        if not plain_directory(root, directory):
            found.append(SkillInvalid(f"{where}: no directory {directory!r}", {"path": directory}))
        elif f"{folder_prefix(directory)}{layout().skill_document}" not in shipped:
            found.append(
                SkillInvalid(
                    f"{where}: {directory}/{layout().skill_document} is missing (or a symbolic"
                    " link, which never ships)",
                    {"path": f"{directory}/{layout().skill_document}"},
                )
            )
    return found


def _prebuilts(
    root: Path, config: dict[str, Any], config_name: str, shipped: frozenset[str]
) -> list[ContractError]:
    found: list[ContractError] = []
    directories = {p["directory"] for p in config.get("prebuilts", [])}
    for index, prebuilt in enumerate(config.get("prebuilts", [])):
        if not plain_directory(root, prebuilt["directory"]):
            found.append(
                ConfigInvalid(
                    f"{config_name}: prebuilts[{index}]: no directory {prebuilt['directory']!r}",
                    {"path": config_name},
                )
            )
    ids: dict[str, str] = {}
    for directory in sorted(directories):
        same = ids.setdefault(payload_id(directory), directory)
        if same != directory:
            found.append(
                ConfigInvalid(
                    f"{config_name}: prebuilts {same!r} and {directory!r} make the same payload"
                    f" id {payload_id(directory)!r}; rename one",
                    {"path": config_name},
                )
            )
    for index, server in enumerate(config.get("mcpServers", [])):
        if server["kind"] != "prebuilt":
            continue
        where = f"{config_name}: mcpServers[{index}]"
        prefix = folder_prefix(server["payload"])
        entry = posixpath.normpath(prefix + server["entry"])
        if server["payload"] not in directories:
            found.append(
                ConfigInvalid(f"{where}: payload {server['payload']!r} is not a declared prebuilt")
            )
        elif not entry.startswith(prefix) or entry not in shipped:
            found.append(
                ConfigInvalid(f"{where}: no entry {server['entry']!r} in {server['payload']!r}")
            )
    return found


def payload_id(directory: str) -> str:
    """The manifest's payload id of a prebuilt directory: its path with `/` made `-`."""
    return directory.strip("/").replace("/", "-")


def _input_schema(route: dict[str, Any], where: str, config_name: str) -> list[ContractError]:
    """A route's `inputSchema` must be a valid draft 2020-12 schema: the server applies it to
    every input, and a schema it cannot apply would refuse them all at run time instead."""
    if "inputSchema" not in route:
        return []
    try:
        Draft202012Validator.check_schema(route["inputSchema"])
    except SchemaError as error:
        at = "".join(f"[{part!r}]" for part in error.absolute_path)
        return [ConfigInvalid(f"{where}{at}: {error.message}", {"path": config_name})]
    outside = [ref for ref in _references(route["inputSchema"]) if not ref.startswith("#")]
    if outside:  # the server never fetches a URL or reads a file to check an input
        return [
            ConfigInvalid(
                f"{where}: $ref {outside[0]!r} points outside the schema; only #... refs",
                {"path": config_name},
            )
        ]
    return []


def _references(schema: Any) -> Iterator[str]:
    """Every `$ref` string in a schema, however deep."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _references(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _references(item)


def _duplicates(config: dict[str, Any], config_name: str) -> list[ContractError]:
    found: list[ContractError] = []
    for member, key in (("routes", "id"), ("mcpServers", "name"), ("skills", "name")):
        seen: set[str] = set()
        for index, item in enumerate(config.get(member, [])):
            if item[key] in seen:
                found.append(
                    ConfigInvalid(
                        f"{config_name}: {member}[{index}]: {key} {item[key]!r} is declared twice",
                        {"path": config_name},
                    )
                )
            seen.add(item[key])
    return found


def folder_prefix(directory: str) -> str:
    """A config's project-relative folder as the prefix of its files' paths: `skills/x/`."""
    return posixpath.normpath(directory.strip("/")) + "/"


def plain_directory(root: Path, directory: str) -> bool:
    """Whether `directory` is a directory of the project reached without any symbolic link
    (a folder that is a link is never walked, so nothing of it could ship)."""
    relative = posixpath.normpath(directory.strip("/"))
    if relative.startswith("../") or relative in ("..", "."):
        return False
    current = root
    for part in relative.split("/"):
        current = current / part
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False
        except OSError:
            return False
    return True
