"""Configuration helpers: define_config, define_prebuilt, define_skill, resolve_config.

`define_config` and `define_skill` are identity helpers, as in the seed: they return what they
are given, after checking it, so a mistake in a project's config file fails where it is written
rather than later in the build. A config factory is checked when it is resolved.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from bundle_contract._generated.errors import ConfigInvalid
from bundle_contract._models import Model, model
from bundle_contract._validation import validate

Config = Mapping[str, Any]
ConfigFactory = Callable[[Model], Any]
Defined = TypeVar("Defined", Mapping[str, Any], Callable[[Model], Any])


def define_config(config: Defined) -> Defined:
    """Return `config` unchanged: a config mapping (checked now) or a factory (checked when
    `resolve_config` calls it with the ConfigContext `{command, mode, projectRoot,
    selectedTargets}`). Raises `ConfigInvalid`."""
    if callable(config):
        return config
    validate("BundleConfig.json", _plain(config), ConfigInvalid)
    return config


def define_skill(skill: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return `skill` unchanged after checking it against SkillDefinition."""
    validate("SkillDefinition.json", skill, ConfigInvalid)
    return skill


def define_prebuilt(directory: str, packages: Sequence[str]) -> Model:
    """Declare one prebuilt payload directory with its run-time package names."""
    data = {"directory": directory, "packages": list(packages)}
    validate("PrebuiltDefinition.json", data, ConfigInvalid)
    return model("PrebuiltDefinition").from_json(data)


def resolve_config(
    config: Config | ConfigFactory,
    *,
    command: str,
    mode: str,
    project_root: str,
    selected_targets: Sequence[str] = (),
) -> Model:
    """The project's BundleConfig: `config` itself, or what its factory returns (or awaits)."""
    context_data = {
        "command": command,
        "mode": mode,
        "projectRoot": project_root,
        "selectedTargets": list(selected_targets),
    }
    validate("ConfigContext.json", context_data, ConfigInvalid)
    if callable(config):
        context = model("ConfigContext").from_json(context_data)
        produced = config(context)
        if inspect.isawaitable(produced):
            produced = _run(produced)
        config = produced
    if not isinstance(config, Mapping):
        raise ConfigInvalid(
            f"a config factory must return a mapping, not {type(config).__name__}",
            {"schema": "BundleConfig.json"},
        )
    plain = _plain(config)
    validate("BundleConfig.json", plain, ConfigInvalid)
    return model("BundleConfig").from_json(plain)


def _plain(value: Any) -> Any:
    """Plain JSON data of a config: models (what define_prebuilt returns) become their JSON."""
    if isinstance(value, Model):
        return value.to_json()
    if isinstance(value, Mapping):
        return {key: _plain(member) for key, member in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(member) for member in value]
    return value


def _run(coroutine: Any) -> Any:
    """Run `coroutine` to its end, also from a thread whose own event loop is running (a
    notebook, a test driving a browser): then on a thread of its own, as asyncio.run may not
    nest."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(coroutine))
    if not inspect.iscoroutine(coroutine):
        # A future or task belongs to the running loop, which waits here: it could never end.
        raise ConfigInvalid(
            "a config factory called from a running event loop must return a coroutine,"
            f" not a {type(coroutine).__name__}",
            {"schema": "BundleConfig.json"},
        )

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="config-factory") as pool:
        return pool.submit(asyncio.run, _await(coroutine)).result()


async def _await(awaitable: Any) -> Any:
    return await awaitable
