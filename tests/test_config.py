"""define_config / define_prebuilt / define_skill / resolve_config."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bundle_contract import Model, define_config, define_prebuilt, define_skill, resolve_config
from bundle_contract._generated.errors import ConfigInvalid

APPLICATION = {"id": "demo", "name": "Demo", "version": "1.0.0"}
CONFIG = {
    "application": APPLICATION,
    "targets": ["host_a"],
    "dev": {"agentApi": True, "contracts": {"fixtures": "fixtures/index.ts"}},
}
CONTEXT = {"command": "dev", "mode": "development", "project_root": "/work/p"}


def test_define_config_is_identity_for_objects_and_factories() -> None:
    assert define_config(CONFIG) is CONFIG

    def factory(context: Model) -> dict[str, Any]:
        return CONFIG

    assert define_config(factory) is factory


def test_define_config_refuses_a_broken_config() -> None:
    with pytest.raises(ConfigInvalid, match=r"\$\.dev\.contracts"):
        define_config({**CONFIG, "dev": {"contracts": {}}})
    with pytest.raises(ConfigInvalid):
        define_config({**CONFIG, "dev": {"hosts": {"host_z": {"executable": "x"}}}})
    with pytest.raises(ConfigInvalid, match="'application' is a required property"):
        define_config({"targets": ["host_a"]})
    with pytest.raises(ConfigInvalid, match=r"\$\.hooks\.beforeTool"):
        define_config({**CONFIG, "hooks": {"beforeTool": "not a reference"}})
    with pytest.raises(ConfigInvalid, match=r"\$\.hooks"):
        define_config({**CONFIG, "hooks": {"onBoot": "handlers:boot"}})


def test_factory_receives_the_context() -> None:
    seen: list[Model] = []

    def factory(context: Model) -> dict[str, Any]:
        seen.append(context)
        return {"application": APPLICATION, "targets": list(context.selectedTargets)}

    resolved = resolve_config(factory, selected_targets=["host_a", "host_d"], **CONTEXT)
    assert resolved.targets == ["host_a", "host_d"]
    assert seen[0].to_json() == {
        "command": "dev",
        "mode": "development",
        "projectRoot": "/work/p",
        "selectedTargets": ["host_a", "host_d"],
    }


def test_async_factory_is_awaited() -> None:
    async def factory(context: Model) -> dict[str, Any]:
        return CONFIG

    assert resolve_config(factory, **CONTEXT).dev["agentApi"] is True


def test_async_factory_is_awaited_from_a_thread_whose_loop_runs() -> None:
    """As in a notebook, or a test driving a browser: asyncio.run may not nest."""

    async def factory(context: Model) -> dict[str, Any]:
        return CONFIG

    async def inside_a_loop() -> Model:
        return resolve_config(factory, **CONTEXT)

    assert asyncio.run(inside_a_loop()).dev["agentApi"] is True


def test_a_future_of_the_running_loop_is_refused_rather_than_waited_for_forever() -> None:
    def factory(context: Model) -> asyncio.Future[dict[str, Any]]:
        return asyncio.get_running_loop().create_future()  # only that loop could finish it

    async def inside_a_loop() -> None:
        with pytest.raises(ConfigInvalid, match="must return a coroutine"):
            resolve_config(factory, **CONTEXT)

    asyncio.run(inside_a_loop())


@pytest.mark.parametrize(
    "produced", [None, ["dev"], {**CONFIG, "dev": {"agentApi": "yes"}}, {"dev": {}}]
)
def test_factory_result_is_checked(produced: Any) -> None:
    with pytest.raises(ConfigInvalid):
        resolve_config(lambda context: produced, **CONTEXT)


def test_context_is_checked() -> None:
    with pytest.raises(ConfigInvalid, match="projectRoot"):
        resolve_config(CONFIG, command="dev", mode="development", project_root="relative")


def test_define_prebuilt() -> None:
    prebuilt = define_prebuilt("prebuilt/linux-x64", ["@scope/native", "left-pad"])
    assert prebuilt.to_json() == {
        "directory": "prebuilt/linux-x64",
        "packages": ["@scope/native", "left-pad"],
    }
    with pytest.raises(ConfigInvalid):
        define_prebuilt("prebuilt", ["Not A Package"])


def test_define_skill() -> None:
    skill = {"name": "review-diff", "description": "Reviews the staged diff."}
    assert define_skill(skill) is skill
    with pytest.raises(ConfigInvalid):
        define_skill({"name": "Review Diff", "description": "x"})
