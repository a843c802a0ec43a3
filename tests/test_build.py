"""The build: a bundle project compiled into an artifact root (bundle_contract._build)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _projects import EXAMPLE, config, copy_example, write_project

from bundle_contract import inspect_artifact, read_artifact_manifest, validate
from bundle_contract._build import DigestCache, build_project
from bundle_contract._build import _projection as projection_module
from bundle_contract._host_plugin import named_wrappers

NATIVE_DENY = {
    "session_id": "s1",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf /"},
    "tool_use_id": "t1",
    "cwd": "/tmp",
}


def only_error(result: object) -> dict[str, object]:
    diagnostics = [d for d in result.diagnostics if d["severity"] == "error"]  # type: ignore[attr-defined]
    assert not result.ok and len(diagnostics) == 1, result.diagnostics  # type: ignore[attr-defined]
    return diagnostics[0]


def test_the_example_builds_into_a_manifest_that_reads_ok_and_inspects_clean(
    tmp_path: Path,
) -> None:
    out = tmp_path / "artifact"
    result = build_project(copy_example(tmp_path / "p"), out)
    assert result.ok, result.diagnostics
    read = read_artifact_manifest(out)
    assert read.status == "ok", read
    inspection = inspect_artifact(out)
    assert inspection.ok, inspection
    epoch = result.epoch
    assert epoch is not None
    validate("ArtifactEpoch.json", epoch)
    assert epoch["id"].startswith("ep_")
    assert sorted(epoch["targetDigests"]) == ["host_a", "host_b", "host_c"]
    assert epoch["projectRevision"] == result.source_revision
    assert epoch["manifestPath"] == str(out / "bundle.manifest.json")
    # A route worker finds what to call in the manifest: the config's references.
    routes = json.loads((out / "bundle.manifest.json").read_bytes())["routes"]
    assert routes == [
        {
            "id": "stop-review",
            "event": "stop",
            "path": "src/safe_shell/routes.py",
            "handler": "safe_shell.routes:stop_review",
            "inputSchema": {
                "type": ["object", "null"],
                "properties": {"verbose": {"type": "boolean"}},
                "additionalProperties": False,
            },
        }
    ]


def test_each_hooks_document_names_exactly_the_manifests_hook_rows(tmp_path: Path) -> None:
    out = tmp_path / "artifact"
    assert build_project(copy_example(tmp_path / "p"), out).ok
    manifest = json.loads((out / "bundle.manifest.json").read_text())
    for host in ("host_a", "host_b"):
        rows = sorted(r["path"] for r in manifest["executables"]["hooks"] if r["host"] == host)
        document = next((out / "hosts" / host).glob("hooks/hooks.json")).read_bytes()
        named = sorted(f"hosts/{host}/{w}" for w in named_wrappers(host, document))
        assert named == rows and len(rows) == 3


def test_a_built_wrapper_denies_in_the_hosts_native_format(tmp_path: Path) -> None:
    out = tmp_path / "artifact"
    assert build_project(copy_example(tmp_path / "p"), out).ok
    wrapper = out / "hosts" / "host_a" / "hooks" / "PreToolUse"
    done = subprocess.run(
        [str(wrapper)],
        input=json.dumps(NATIVE_DENY).encode(),
        capture_output=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if not k.startswith("BUNDLE_")},
    )
    assert done.returncode == 0
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "deletes the filesystem root" in answer["permissionDecisionReason"]


def test_a_rebuild_reads_only_the_files_whose_stat_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = copy_example(tmp_path / "p")
    for path in project.rglob("*"):  # older than the racy window, so the cache may vouch
        if path.is_file():
            os.utime(path, ns=(10**18, 10**18))
    from bundle_contract._build import _sources

    real = _sources._copy_entry
    read: list[str] = []

    def counting(entry, *args):  # type: ignore[no-untyped-def]
        read.append(entry.relative)
        return real(entry, *args)

    monkeypatch.setattr(_sources, "_copy_entry", counting)
    cache = DigestCache()
    first = build_project(project, epochs=tmp_path / "epochs", cache=cache)
    assert first.ok and first.epoch is not None
    assert "safe_shell/rules.py" in read
    read.clear()
    same = build_project(
        project, epochs=tmp_path / "epochs", cache=cache, previous=Path(first.artifact or "")
    )
    assert same.ok and same.epoch is not None and read == []
    assert same.epoch["id"] == first.epoch["id"]  # named by content: the same epoch
    hooks = project / "safe_shell" / "hooks.py"
    hooks.write_text(hooks.read_text() + "\n# edited\n")
    os.utime(hooks, ns=(10**18 + 1, 10**18 + 1))
    edited = build_project(
        project, epochs=tmp_path / "epochs", cache=cache, previous=Path(first.artifact or "")
    )
    assert edited.ok and edited.epoch is not None and read == ["safe_shell/hooks.py"]
    assert edited.epoch["id"] != first.epoch["id"]


def test_an_edit_makes_a_new_epoch_and_unchanged_files_are_hard_links(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    for path in project.rglob("*"):  # older than the racy window, so the cache may vouch
        os.utime(path, ns=(10**18, 10**18))
    epochs = tmp_path / "epochs"
    cache = DigestCache()
    first = build_project(project, epochs=epochs, cache=cache)
    assert first.ok and first.epoch is not None and first.artifact is not None
    handlers = project / "handlers.py"
    handlers.write_text(handlers.read_text() + "\n# edited\n")
    second = build_project(project, epochs=epochs, cache=cache, previous=Path(first.artifact))
    assert second.ok and second.epoch is not None and second.artifact is not None
    assert second.epoch["id"] != first.epoch["id"]
    assert second.source_revision != first.source_revision
    old, new = Path(first.artifact), Path(second.artifact)
    config = "src/bundle.config.json"
    assert (new / config).stat().st_ino == (old / config).stat().st_ino  # shared with the first
    changed = (new / "src" / "handlers.py").stat()
    assert changed.st_ino != (old / "src" / "handlers.py").stat().st_ino
    # Each self-contained plugin directory holds the same bytes through a link, not a copy.
    for host in ("host_a", "host_b"):
        assert (new / "hosts" / host / "src" / "handlers.py").stat().st_ino == changed.st_ino
        assert (new / "hosts" / host / config).stat().st_ino == (old / config).stat().st_ino
    assert changed.st_nlink == 3
    assert old.is_dir()  # an old epoch is never touched by a new build


def test_a_project_path_with_spaces_and_non_ascii_builds_and_its_wrappers_run(
    tmp_path: Path,
) -> None:
    project = write_project(tmp_path / "my bündle ✓")
    out = tmp_path / "out dir é"
    result = build_project(project, out)
    assert result.ok, result.diagnostics
    done = subprocess.run(
        [str(out / "hosts" / "host_b" / "hooks" / "PreToolUse")],
        input=json.dumps(NATIVE_DENY).encode(),
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0 and b"no recursive deletes" in done.stdout


def test_no_staging_directory_is_left_when_a_build_fails(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", config(hooks={"beforeTool": "handlers:missing"}))
    result = build_project(project, epochs=tmp_path / "epochs")
    assert not result.ok
    assert not (tmp_path / "epochs").exists() or not list((tmp_path / "epochs").iterdir())


# --- bad input: each a failed attempt with one readable error, nothing published ---


def test_a_syntax_error_in_a_handler_module_names_its_file_and_line(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", files={"handlers.py": "def before_tool(:\n    pass\n"})
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4703"
    assert error["path"] == "handlers.py" and error["line"] == 1
    assert str(error["message"]).startswith("handlers.py:1: SyntaxError")
    assert not (tmp_path / "out").exists()


def test_an_import_error_in_a_handler_module_names_the_importing_line(tmp_path: Path) -> None:
    body = "import os\nimport no_such_module_anywhere\n\ndef before_tool(p, c):\n    return None\n"
    project = write_project(tmp_path / "p", files={"handlers.py": body})
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4703" and error["path"] == "handlers.py" and error["line"] == 2
    assert "ModuleNotFoundError" in str(error["message"])


def test_a_reference_to_a_missing_function_names_the_config_member(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", config(hooks={"stop": "handlers:on_stop"}))
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4703"
    assert "hooks.stop" in str(error["message"]) and "on_stop" in str(error["message"])


def test_a_route_input_schema_that_is_no_schema_names_the_route_and_the_keyword(
    tmp_path: Path,
) -> None:
    route = {"id": "r", "handler": "handlers:before_tool", "families": ["stop"]}
    bad = route | {"inputSchema": {"type": "objekt"}}
    project = write_project(tmp_path / "p", config(routes=[bad]))
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4402"
    assert str(error["message"]).startswith("bundle.config.json: routes[0].inputSchema['type']")
    fetched = route | {"inputSchema": {"$ref": "file:///etc/passwd"}}
    write_project(tmp_path / "p", config(routes=[fetched]))
    error = only_error(build_project(tmp_path / "p", tmp_path / "out1"))
    assert error["code"] == "BX4402" and "points outside the schema" in str(error["message"])
    good = route | {"inputSchema": {"type": "object", "required": ["n"]}}
    write_project(tmp_path / "p", config(routes=[good]))
    assert build_project(tmp_path / "p", tmp_path / "out2").ok


def test_a_reference_outside_the_project_is_refused(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", config(hooks={"stop": "json:loads"}))
    assert only_error(build_project(project, tmp_path / "out"))["code"] == "BX4703"


def test_a_config_factory_that_raises_names_its_line(tmp_path: Path) -> None:
    source = """
        from bundle_contract import define_config

        def make(context):
            raise RuntimeError("no targets for " + context["command"])

        config = define_config(make)
    """
    project = write_project(tmp_path / "p", python_config=source)
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4702" and error["path"] == "bundle.config.py" and error["line"] == 5
    assert "RuntimeError: no targets for build" in str(error["message"])


@pytest.mark.parametrize(
    ("produced", "fragment"),
    [
        ("['not', 'a', 'mapping']", "must return a mapping"),
        (
            "{'application': {'id': 'x', 'name': 'X', 'version': '1.0.0'}, 'targets': 3}",
            "$.targets",
        ),
    ],
)
def test_a_config_factory_returning_garbage_is_a_readable_config_error(
    tmp_path: Path, produced: str, fragment: str
) -> None:
    source = f"config = lambda context: {produced}\n"
    project = write_project(tmp_path / "p", python_config=source)
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4402"
    assert str(error["message"]).startswith("bundle.config.py: ") and fragment in str(
        error["message"]
    )


def test_a_config_that_does_not_conform_names_the_json_path(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", config(hooks={"beforeTool": "handlers.before_tool"}))
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4402" and "$.hooks.beforeTool" in str(error["message"])
    assert str(error["message"]).startswith("bundle.config.json: ")


def test_a_config_file_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    (project / "bundle.config.json").write_text('{\n  "application": ,\n}')
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4702" and error["line"] == 2


@pytest.mark.parametrize("which", ["none", "both"])
def test_a_project_needs_exactly_one_config_file(tmp_path: Path, which: str) -> None:
    project = write_project(tmp_path / "p")
    if which == "none":
        (project / "bundle.config.json").unlink()
    else:
        (project / "bundle.config.py").write_text("config = {}\n")
    assert only_error(build_project(project, tmp_path / "out"))["code"] == "BX4701"


def test_a_skill_without_skill_md_is_refused(tmp_path: Path) -> None:
    skill = {"name": "s", "description": "d", "directory": "skills/s"}
    project = write_project(
        tmp_path / "p", config(skills=[skill]), files={"skills/s/notes.txt": "x"}
    )
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4704" and error["path"] == "skills/s/SKILL.md"


def test_a_hooks_document_naming_a_wrapper_without_its_row_is_ab6018(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = projection_module.plugin_files

    def doubled(host: str, **kwargs: object) -> dict[str, bytes]:
        hooks = list(kwargs.pop("hooks"))  # type: ignore[call-overload]
        native, wrapper, timeout = hooks[0]
        hooks.append((native, wrapper + "-again", timeout))
        return real(host, hooks=hooks, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(projection_module, "plugin_files", doubled)
    project = write_project(tmp_path / "p", config(targets=["host_a"]))
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "AB6018"


def test_a_file_deleted_during_the_build_fails_the_attempt_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_project(tmp_path / "p", files={"data/big.txt": "x" * 1000})
    from bundle_contract._build import _tree

    real = _tree.open_regular

    def racing(entry):  # type: ignore[no-untyped-def]
        if entry.relative == "data/big.txt":  # listed, then removed before it is opened
            (project / "data" / "big.txt").unlink()
        return real(entry)

    monkeypatch.setattr(_tree, "open_regular", racing)
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4708" and error["path"] == "data/big.txt"
    assert not (tmp_path / "out").exists()


def test_the_cli_builds_the_example_and_fails_with_one_line_per_problem(tmp_path: Path) -> None:
    out = tmp_path / "artifact"
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bundle_contract._build._cli",
            str(EXAMPLE),
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    broken = write_project(tmp_path / "broken", config(hooks={"stop": "handlers:nope"}))
    done = subprocess.run(
        [sys.executable, "-m", "bundle_contract._build._cli", str(broken)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error BX4703 ") and len(done.stderr.splitlines()) == 1


def test_a_handler_a_target_cannot_run_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    # host_c has no native agent/start event; host_d sends no toolUseId, which the beforeTool
    # payload then leaves out (hooks.toml unsent): no warning. The others get both handlers.
    data = config(
        targets=["host_a", "host_c", "host_d"],
        hooks={"beforeTool": "handlers:before_tool", "agentStart": "handlers:session_start"},
    )
    result = build_project(write_project(tmp_path / "p", data), tmp_path / "out")
    assert result.ok, result.diagnostics
    messages = [d["message"] for d in result.diagnostics]
    assert {d["code"] for d in result.diagnostics} == {"BX4709"}
    assert {d["severity"] for d in result.diagnostics} == {"warning"}
    assert any(m.startswith("host_c has no native event for agentStart") for m in messages)
    assert not any("toolUseId" in m for m in messages)
    assert not any(m.startswith("host_a") for m in messages)
    assert result.epoch is not None
    assert result.epoch["diagnostics"]["warnings"] == len(result.diagnostics)


def test_bundle_devkit_new_scaffolds_a_project_that_builds(tmp_path: Path) -> None:
    target = tmp_path / "My Bundle"
    done = subprocess.run(
        [sys.executable, "-m", "bundle_contract._build._scaffold", "new", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "bundle-server" in done.stdout
    assert not (target / ".bundle").exists() and not list(target.rglob("__pycache__"))
    result = build_project(target, tmp_path / "out")
    assert result.ok, result.diagnostics
    assert result.config is not None
    assert result.config["application"]["id"] == "my-bundle"
    assert result.config["application"]["author"] == {"name": getpass.getuser()}
    again = subprocess.run(
        [sys.executable, "-m", "bundle_contract._build._scaffold", "new", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2 and "not an empty directory" in again.stderr


@pytest.mark.parametrize("host", ["host_a", "host_b"])
def test_the_built_compiled_mcp_server_answers_a_real_mcp_client(tmp_path: Path, host: str) -> None:
    """The launch entry a host reads from a copy of the plugin's MCP document starts the
    example's compiled server over stdio, as that host resolves the plugin root (host_a
    substitutes its root variable; host_b starts it in the plugin root); the official SDK
    client lists and calls its tool."""
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    out = tmp_path / "artifact"
    assert build_project(copy_example(tmp_path / "p"), out).ok
    plugin = tmp_path / "elsewhere" / "plugin copy"
    shutil.copytree(out / "hosts" / host, plugin)  # self-contained: a copy works alike
    shutil.rmtree(out)
    entry = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]["safe-shell"]

    def expand(value: str) -> str:  # what the host does with its plugin-root variable
        return value.replace("${CLAUDE_PLUGIN_ROOT}", str(plugin))

    cwd = plugin / entry["cwd"] if "cwd" in entry else tmp_path
    params = StdioServerParameters(
        command=expand(entry["command"]),  # sh: the interpreter script needs no execute bit
        args=[expand(a) for a in entry["args"]],
        env={k: expand(v) for k, v in entry["env"].items()},
        cwd=cwd,
    )

    async def talk() -> tuple[list[str], str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            called = await session.call_tool("check_command", {"command": "rm -rf /"})
            return [t.name for t in tools.tools], str(called.content[0].text)  # type: ignore[union-attr]

    names, answer = asyncio.run(asyncio.wait_for(talk(), 60))
    assert sorted(names) == [
        "check_command",
        "check_commands_slowly",
        "check_script",
        "command_report",
    ]
    assert answer == "refused: deletes the filesystem root"


def test_a_python_config_that_define_config_refuses_is_a_config_error_at_its_line(
    tmp_path: Path,
) -> None:
    source = """
        from bundle_contract import define_config

        config = define_config({"application": {"id": "x", "name": "X", "version": "1"},
                                "targets": ["host_a"]})
    """
    error = only_error(
        build_project(write_project(tmp_path / "p", python_config=source), tmp_path / "o")
    )
    assert error["code"] == "BX4402" and error["path"] == "bundle.config.py" and error["line"] == 4
    assert "$.application.version" in str(error["message"])


def test_prebuilts_ship_their_payload_without_ignored_files_or_outside_links(
    tmp_path: Path,
) -> None:
    source = """
        from bundle_contract import define_config, define_prebuilt

        config = define_config({
            "application": {"id": "x", "name": "X", "version": "1.0.0"},
            "targets": ["host_a"],
            "prebuilts": [define_prebuilt("vendor/tool", ["left-pad"])],
            "mcpServers": [{"name": "tool", "kind": "prebuilt", "payload": "vendor/tool",
                            "entry": "index.js"}],
        })
    """
    files = {"vendor/tool/index.js": "//", "vendor/tool/.git/config": "[core]", ".env": "KEY=1"}
    project = write_project(tmp_path / "p", python_config=source, files=files)
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (project / "vendor" / "tool" / "leak.txt").symlink_to(secret)
    out = tmp_path / "out"
    result = build_project(project, out)
    assert result.ok, result.diagnostics
    shipped = {
        row["path"] for row in json.loads((out / "bundle.manifest.json").read_text())["files"]
    }
    assert "payloads/vendor-tool/index.js" in shipped
    assert not any(".git" in path or ".env" in path or "leak" in path for path in shipped)
    assert [d["path"] for d in result.diagnostics if d["code"] == "BX4901"] == [
        "vendor/tool/leak.txt"
    ]


@pytest.mark.parametrize("entry", ["../../handlers.py", "missing.js"])
def test_a_prebuilt_entry_outside_its_payload_is_refused(tmp_path: Path, entry: str) -> None:
    data = config(
        prebuilts=[{"directory": "vendor/tool", "packages": []}],
        mcpServers=[{"name": "t", "kind": "prebuilt", "payload": "vendor/tool", "entry": entry}],
    )
    project = write_project(tmp_path / "p", data, files={"vendor/tool/index.js": "//"})
    error = only_error(build_project(project, tmp_path / "out"))
    assert error["code"] == "BX4402" and entry in str(error["message"])


def test_an_out_directory_named_like_an_epoch_is_still_replaced(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    out = tmp_path / "ep_0123456789abcdef"
    assert build_project(project, out).ok
    handlers = project / "handlers.py"
    handlers.write_text(handlers.read_text() + "\n# changed\n")
    assert build_project(project, out).ok
    assert (out / "src" / "handlers.py").read_text().endswith("# changed\n")


def test_a_build_process_that_dies_is_answered_for_by_the_worker(tmp_path: Path) -> None:
    # The config ends its own process: the worker's parent replies for the dead child.
    project = write_project(tmp_path / "p", python_config="import os\nos._exit(3)\n")
    argv = [sys.executable, "-P", "-m", "bundle_contract._build._worker", str(project)]
    argv += [str(tmp_path / "epochs"), str(tmp_path / "cache.json")]
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as worker:
        assert worker.stdin is not None and worker.stdout is not None
        assert json.loads(worker.stdout.readline())["event"] == "ready"
        worker.stdin.write('{"id": 1, "previous": null}\n')
        worker.stdin.flush()
        replies = [json.loads(worker.stdout.readline()) for _ in range(2)]
        worker.stdin.close()
        worker.wait(timeout=30)
    assert [r["event"] for r in replies] == ["started", "finished"]
    result = replies[1]["result"]
    assert not result["ok"] and "exit status 3" in result["diagnostics"][0]["message"]
