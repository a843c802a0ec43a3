"""The kit on the project's own example, as the README says to run it, and the inputs the kit
sends a route (conformance/_input.py, `invocations.route_input`).

One server serves a copy of examples/safe-shell for the module. The README's command for it
is read from the README itself and run as written (its `$PORT` and `$TOKEN` filled in); the
other tests run a few checks against variants of the example's route schema (patched into the
running server's manifest reading, so the route list and the server's own input check agree)
and read what the kit sent from the server's invocation records.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import kit_server, kit_target

from bundle_server import DevServer
from bundle_server.invocations import service
from conformance._cli import main, parser
from conformance._client import Client
from conformance._input import accepted_input, refused_input

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
EXAMPLE = REPO / "examples" / "safe-shell"
ROUTE = "stop-review"  # the example's one route
MARKER = "kit-marker-0"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("kit-example")
    project = root / "safe-shell"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".bundle", "__pycache__"))
    with kit_server(root, project) as running:
        yield running


def readme_command() -> list[str]:
    """The README's `bundle-conformance run` for the example: its arguments after the command."""
    text = README.read_text(encoding="utf-8")
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == [".venv/bin/bundle-conformance", "run"] and ROUTE in words:
                return words[1:]
    raise AssertionError("the README gives no bundle-conformance run for the example")


def readme_argv(server: DevServer) -> list[str]:
    """The README's command for `server` (its `$PORT` and `$TOKEN` filled in)."""
    port = server.url.rsplit(":", 1)[1]
    filled = [
        word.replace("$PORT", port).replace("$TOKEN", server.session_token)
        for word in readme_command()
    ]
    assert not [word for word in filled if "$" in word], filled  # nothing the test lacks
    return filled


def results(out: str) -> dict[str, tuple[str, str]]:
    """The results `run` printed: requirement id -> (status, reason)."""
    found = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and re.fullmatch(r"[A-Z]+-[0-9]{3}", parts[1]):
            found[parts[1]] = (parts[0], parts[2] if len(parts) > 2 else "")
    return found


def recent(server: DevServer, limit: int) -> list[dict[str, Any]]:
    """The server's newest `limit` invocations, each as its item route answers it."""
    client = Client(kit_target(server))
    rows = client.get(f"/api/routes/invocations?limit={limit}").json()["invocations"]
    return [client.get(f"/api/routes/invocations/{r['id']}").json()["invocation"] for r in rows]


def schema_is(monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any]) -> None:
    """The example's route declares `schema` (in the route list and in the server's check)."""
    routes = service.manifest_routes

    def patched(root: Path) -> list[dict[str, Any]]:
        return [r | {"inputSchema": schema} if r["id"] == ROUTE else r for r in routes(root)]

    monkeypatch.setattr(service, "manifest_routes", patched)


def test_the_readme_command_passes_on_the_example(
    example: DevServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(readme_argv(example))
    out = capsys.readouterr().out
    assert code == 0, out
    found = results(out)
    assert not [i for i, (status, _) in found.items() if status == "NOT_TESTABLE"], out
    for requirement in ("INV-002", "INV-005", "INV-022", "INV-026", "INV-039", "RUN-003"):
        assert found[requirement][0] == "PASS", found[requirement]
    # The example's schema takes no marker: the kit sent its least input, `{}`.
    assert "input {}" in found["INV-026"][1]


def test_a_route_input_the_kit_cannot_make_is_named_on_the_command_line_or_in_the_target_file(
    example: DevServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    ticket = {"type": "string", "pattern": "^T-[0-9]+$"}
    schema_is(
        monkeypatch,
        {
            "type": "object",
            "properties": {"ticket": ticket},
            "required": ["ticket"],
            "additionalProperties": False,
        },
    )
    argv = [*readme_argv(example), "--select", "INV-026", "RUN-003"]
    assert main(argv) == 1
    found = results(capsys.readouterr().out)
    for requirement in ("INV-026", "RUN-003"):
        status, reason = found[requirement]
        assert status == "NOT_TESTABLE" and "--route-input JSON" in reason, found[requirement]
    assert main([*argv, "--route-input", '{"ticket": "T-7"}']) == 0, capsys.readouterr().out
    assert {"ticket": "T-7"} in [found["input"] for found in recent(example, 3)]
    file = tmp_path / "target.toml"
    file.write_text('route_input = \'{"ticket": "T-8"}\'\n', encoding="utf-8")
    assert main([*argv, "--target-file", str(file)]) == 0, capsys.readouterr().out
    assert {"ticket": "T-8"} in [found["input"] for found in recent(example, 3)]


def test_the_marker_travels_in_the_request_id_and_in_a_free_string_property(
    example: DevServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    note = {"type": "string", "maxLength": 64}
    schema_is(
        monkeypatch,
        {
            "type": "object",
            "properties": {"verbose": {"type": "boolean"}, "note": note},
            "required": ["note"],
            "additionalProperties": False,
        },
    )
    assert main([*readme_argv(example), "--select", "INV-022", "INV-026"]) == 0, (
        capsys.readouterr().out
    )
    made = recent(example, 4)
    for found in made:  # each of the kit's invocations: its input's marker is its requestId's
        assert found["requestId"] == f"conformance-r-{found['input']['note']}", found


def test_the_readme_lists_every_option_of_run() -> None:
    (commands,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    run = commands.choices["run"]
    options = [o for a in run._actions for o in a.option_strings if o.startswith("--")]
    text = README.read_text(encoding="utf-8").split("## Checking an implementation")[1]
    listed = re.findall(r"^\| `(--[a-z-]+)", text.split("\n## ")[0], re.M)
    assert sorted(set(options) - {"--help"}) == sorted(listed)


def test_a_route_input_that_is_not_json_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "--url", "http://127.0.0.1:9", "--session", "s", "--route-input", "{nope"]
    assert main(argv) == 2
    assert "--route-input must be JSON text" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("schema", "made"),
    [
        # The example's: a closed object of a boolean: no room for the marker, `{}`.
        (
            {
                "type": ["object", "null"],
                "properties": {"verbose": {"type": "boolean"}},
                "additionalProperties": False,
            },
            ({}, False),
        ),
        ({"type": ["object", "null"]}, ({"conformance": MARKER}, True)),  # an open object
        (True, ({"conformance": MARKER}, True)),
        (
            {"anyOf": [{"type": "null"}, {"type": "object", "required": ["a"]}]},
            ({"a": None, "conformance": MARKER}, True),
        ),
        (
            {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 3}, "name": {"type": "string"}},
                "required": ["n"],
                "additionalProperties": False,
            },
            ({"n": 3, "name": MARKER}, True),  # a free string property, the required member
        ),
        ({"type": "string", "maxLength": 4}, ("", False)),  # no room: the shortest
        ({"type": "string", "format": "email"}, ("conformance@example.com", False)),
        ({"type": "integer", "exclusiveMinimum": 5}, (6, False)),
        ({"enum": ["low", "high"]}, ("low", False)),
        ({"type": "array", "items": {"const": 1}, "minItems": 2}, ([1, 1], False)),
        (
            {
                "$defs": {"mode": {"enum": ["x", "y"]}},
                "type": "object",
                "properties": {"mode": {"$ref": "#/$defs/mode"}},
                "required": ["mode"],
                "additionalProperties": False,
            },
            ({"mode": "x"}, False),
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 20}]},
            ("kit-marker-0", True),  # a branch of strings: the marker itself
        ),
        ({"type": "string", "pattern": "^T-[0-9]+$"}, None),  # the kit matches no pattern
        ({"$ref": "https://example.com/schema.json"}, None),  # never fetched
        ({"not": {}}, None),
    ],
)
def test_the_kit_makes_an_input_its_route_accepts(schema: Any, made: Any) -> None:
    assert accepted_input(schema, MARKER) == made


def test_the_kit_still_finds_an_input_the_example_route_refuses() -> None:
    closed = {"type": ["object", "null"], "additionalProperties": False}
    assert refused_input(closed) == ("value", "conformance-input")
    assert refused_input(True) is None
