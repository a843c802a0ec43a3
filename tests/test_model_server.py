"""The scripted model: the script stepper (sans-IO), and its server on a free loopback port
(routing, streaming, recording, refusals) and command."""

from __future__ import annotations

import gzip
import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from bundle_contract._generated.errors import ModelInvalid
from bundle_server.model import ScriptedModel, load_script, start_scripted_model
from bundle_server.model.neutral import (
    Message,
    ModelRequest,
    Text,
    Tool,
    ToolCall,
    ToolResult,
)
from bundle_server.model.script import ScriptStepper, resolve, smallest_instance
from bundle_server.model.server import MAX_BODY

ROOT = Path(__file__).resolve().parents[1]


def request(
    *parts: Any,
    tools: tuple[str, ...] = ("Bash",),
    system: str = "",
    history: tuple[Message, ...] = (),
    schema: dict[str, Any] | None = None,
) -> ModelRequest:
    """A request whose new input is `parts` (strings become text)."""
    made = tuple(Text(p) if isinstance(p, str) else p for p in parts)
    return ModelRequest(
        dialect="anthropic",
        model="m",
        messages=(*history, Message("user", made)),
        system=system,
        tools=tuple(Tool(name) for name in tools),
        answer_schema=schema,
    )


ANSWERED = (Message("user", (Text("go"),)), Message("assistant", (ToolCall("c1", "Bash", {}),)))


# -- the stepper -------------------------------------------------------------------------------


def test_turns_play_in_order_then_the_final_text() -> None:
    stepper = ScriptStepper(
        {
            "turns": [
                {
                    "text": "one",
                    "toolCalls": [{"shell": "ls"}, {"tool": "Bash", "input": {"x": 1}}],
                },
                {"text": "two"},
            ]
        }
    )
    first = stepper.answer(request("go"))
    assert (first.turn, first.text) == (0, "one")
    assert first.tool_calls == (
        ToolCall("scripted_0001", "Bash", {"command": "ls"}),
        ToolCall("scripted_0002", "Bash", {"x": 1}),
    )
    assert stepper.answer(request("again")).turn == 1
    assert not stepper.answer(request("go")).tool_calls
    last = stepper.answer(request("more"))
    assert (last.turn, last.text, last.note) == (None, "Done.", "every turn is played")
    assert stepper.finished and stepper.next_turn == 2


def test_a_turn_waits_until_its_conditions_hold() -> None:
    stepper = ScriptStepper(
        {
            "finalText": "waiting",
            "turns": [
                {"when": {"toolResult": True, "textContains": "exit 0"}, "text": "ran"},
                {"when": {"toolResult": False, "systemContains": "title"}, "text": "a title"},
            ],
        }
    )
    waits = stepper.answer(request("go"))
    assert (waits.turn, waits.text) == (None, "waiting")
    assert waits.note == "turn 0 waits: no tool result yet"
    wrong = stepper.answer(request(ToolResult("c1", "exit 1"), history=ANSWERED))
    assert wrong.note == "turn 0 waits: the new input does not contain 'exit 0'"
    assert stepper.answer(request(ToolResult("c1", "exit 0"), history=ANSWERED)).turn == 0
    result = request(ToolResult("c2", "x"), system="title", history=ANSWERED)
    assert stepper.answer(result).note == "turn 1 waits: the new input carries a tool result"
    assert stepper.answer(request("hi", system="say the title")).text == "a title"


def test_the_new_input_is_what_follows_the_last_answer() -> None:
    old = (*ANSWERED, Message("user", (ToolResult("c1", "old output"),)))
    answered = (*old, Message("assistant", (Text("ok"),)))
    fresh = request("Stop hook feedback: go on", history=answered)
    assert fresh.pending_text == "Stop hook feedback: go on"
    assert not fresh.carries_tool_result
    assert request(ToolResult("c1", "x"), history=old).carries_tool_result


def test_a_turn_waits_while_a_tool_it_calls_is_not_offered() -> None:
    stepper = ScriptStepper({"turns": [{"toolCalls": [{"tool": "Read"}]}]})
    reply = stepper.answer(request("go", tools=()))
    assert reply.note == "turn 0 waits: the tool 'Read' is not offered"
    assert stepper.answer(request("go", tools=("Read",))).tool_calls[0].input == {}


def test_json_answers_do_not_play_a_turn() -> None:
    stepper = ScriptStepper({"turns": [{"text": "one"}]})
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    reply = stepper.answer(request("title this", schema=schema))
    assert (reply.turn, json.loads(reply.text)) == (None, {"title": "scripted"})
    assert stepper.next_turn == 0


@pytest.mark.parametrize(
    ("offered", "expected"),
    [
        (("Bash", "Read"), ("Bash", {"command": "ls -a"})),
        (("exec_command", "write_stdin"), ("exec_command", {"cmd": "ls -a"})),
        (("run_shell_command",), ("run_shell_command", {"command": "ls -a"})),
    ],
)
def test_the_shell_call_resolves_to_each_hosts_shell_tool(
    offered: tuple[str, ...], expected: tuple[str, dict[str, str]]
) -> None:
    assert resolve({"shell": "ls -a"}, offered) == expected
    assert "no shell tool is offered" in str(resolve({"shell": "ls"}, ("Read",)))


@pytest.mark.parametrize(
    "spelled",
    ["mcp__plugin_my-bundle_tiny__echo", "mcp__tiny__echo", "mcp_tiny_echo"],
)
def test_an_mcp_call_resolves_to_each_hosts_spelling(spelled: str) -> None:
    call = {"server": "tiny", "tool": "echo", "input": {"text": "hi"}}
    assert resolve(call, ("Bash", spelled)) == (spelled, {"text": "hi"})
    assert isinstance(resolve(call, ("Bash", "mcp__other__echo", "mcp_tiny_echo2")), str)


def test_an_mcp_call_that_two_plugins_offer_is_ambiguous() -> None:
    call = {"server": "tiny", "tool": "echo"}
    offered = ("mcp__plugin_a_tiny__echo", "mcp__plugin_b_tiny__echo")
    assert resolve(call, offered) == "the MCP tool 'echo' of the server 'tiny' is not offered"


BUNDLE = ("demo:shell-safety", "demo:review-diff")


@pytest.mark.parametrize("token", ["shell-safety", "/demo:shell-safety", "$shell-safety"])
@pytest.mark.parametrize(
    ("offered", "host", "expected"),
    [
        (("Bash", "Skill"), None, ("Skill", {"skill": "demo:shell-safety"})),
        (("Bash", "Skill"), "host_a", ("Skill", {"skill": "demo:shell-safety"})),
        (("activate_skill",), None, ("activate_skill", {"name": "shell-safety"})),
        (("activate_skill",), "host_c", ("activate_skill", {"name": "shell-safety"})),
    ],
)
def test_a_skill_call_resolves_to_each_hosts_skill_tool(
    token: str, offered: tuple[str, ...], host: str | None, expected: tuple[str, Any]
) -> None:
    assert resolve({"skill": token}, offered, skills=BUNDLE, host=host) == expected


def test_a_skill_call_says_why_it_cannot_be_played() -> None:
    call = {"skill": "shell-safety"}
    codex = resolve(call, ("exec_command",), skills=BUNDLE, host="host_b")
    assert isinstance(codex, str)
    assert codex.startswith("host_b loads a skill without a tool call (Codex CLI 0.171.0 has no")
    assert resolve(call, ("Bash",), skills=BUNDLE) == (
        "no skill tool is offered (one of Skill (host_a), activate_skill (host_c))"
    )
    assert resolve(call, ("Bash",), skills=BUNDLE, host="host_a") == (
        "host_a's skill tool 'Skill' is not offered"
    )
    assert resolve(call, ("Skill",)) == (
        "the scripted model was given no bundle skills for 'shell-safety' to name"
    )
    assert resolve({"skill": "/shell-safty"}, ("Skill",), skills=BUNDLE) == (
        "the bundle's skills: '/shell-safty' names none of 2 skill(s);"
        " did you mean demo:shell-safety?"
    )
    two = resolve({"skill": "review"}, ("Skill",), skills=("a:review", "b:review"))
    assert two == (
        "the bundle's skills: 'review' is ambiguous: it names a:review, b:review;"
        " qualify it as <plugin>:review"
    )
    assert resolve({"skill": "review"}, ("Skill",), skills=("review",)) == (
        "host_a names a skill with its plugin part, and review was given without one"
    )
    # Gemini CLI names a skill by its bare name: no plugin part needed.
    assert resolve({"skill": "review"}, ("activate_skill",), skills=("review",)) == (
        "activate_skill",
        {"name": "review"},
    )


def test_a_skill_turn_plays_once_its_token_names_a_skill_of_the_bundle() -> None:
    script = {"turns": [{"text": "Loading.", "toolCalls": [{"skill": "/demo:review-diff"}]}]}
    unknown = ScriptStepper({"turns": [{"toolCalls": [{"skill": "other"}]}]}, skills=BUNDLE)
    reply = unknown.answer(request("go", tools=("Skill",)))
    assert reply.turn is None and reply.note == "turn 0 waits: the bundle's skills: 'other'" + (
        " names none of 2 skill(s)"
    )
    stepper = ScriptStepper(script, skills=BUNDLE, host="host_a")
    played = stepper.answer(request("go", tools=("Bash", "Skill")))
    assert played.turn == 0 and played.text == "Loading."
    assert [(c.name, dict(c.input)) for c in played.tool_calls] == [
        ("Skill", {"skill": "demo:review-diff"})
    ]


def test_a_script_with_a_malformed_skill_token_or_an_unknown_host_is_refused() -> None:
    bad = {"turns": [{"text": "a"}, {"toolCalls": [{"shell": "ls"}, {"skill": "Shell Safety"}]}]}
    with pytest.raises(
        ModelInvalid, match=r"\$\.turns\[1\]\.toolCalls\[1\]\.skill: 'Shell Safety'"
    ):
        ScriptStepper(bad)
    with pytest.raises(ModelInvalid, match="ModelScript"):
        ScriptStepper({"turns": [{"toolCalls": [{"skill": "x", "input": {}}]}]})
    with pytest.raises(ValueError, match="unknown host kind 'host_z'"):
        ScriptStepper({"turns": []}, host="host_z")


@pytest.mark.parametrize(
    "script",
    [
        {},
        {"turns": [{}]},
        {"turns": [{"toolCalls": [{"shell": "ls", "tool": "Bash"}]}]},
        {"turns": [], "extra": 1},
    ],
)
def test_a_script_that_does_not_conform_is_refused(script: dict[str, Any]) -> None:
    with pytest.raises(ModelInvalid, match="ModelScript"):
        ScriptStepper(script)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {
                "type": "OBJECT",
                "properties": {
                    "complexity_reasoning": {"type": "STRING"},
                    "complexity_score": {"type": "INTEGER"},
                },
                "required": ["complexity_reasoning", "complexity_score"],
            },
            {"complexity_reasoning": "scripted", "complexity_score": 1},
        ),
        ({"type": "integer", "minimum": 5}, 5),
        ({"type": "number", "exclusiveMinimum": 2}, 3),
        ({"type": "string", "maxLength": 3}, "scr"),
        ({"type": "string", "minLength": 12}, "scriptedxxxx"),
        ({"enum": ["b", "a"]}, "b"),
        ({"const": 7}, 7),
        ({"anyOf": [{"type": "boolean"}, {"type": "string"}]}, False),
        ({"type": ["null", "string"]}, None),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1, 1]),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {}),
        (True, {}),
    ],
)
def test_smallest_instance(schema: Any, expected: Any) -> None:
    assert smallest_instance(schema) == expected


# -- the server --------------------------------------------------------------------------------

SCRIPT = {
    "turns": [
        {"text": "Running.", "toolCalls": [{"shell": "touch marker.txt"}]},
        {"when": {"toolResult": True}, "text": "Done it."},
    ],
    "finalText": "Nothing left.",
}


def call(
    model: ScriptedModel,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
    try:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


@pytest.fixture
def model(tmp_path: Path) -> Any:
    with start_scripted_model(SCRIPT, record=tmp_path / "requests.jsonl") as running:
        yield running


def anthropic_turn(content: Any, *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "stream": stream,
        "messages": content,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    }


def test_the_server_plays_the_script_and_records_every_request(
    model: ScriptedModel, tmp_path: Path
) -> None:
    assert model.url == f"http://127.0.0.1:{model.port}"
    first = [{"role": "user", "content": "make it"}]
    status, media, body = call(model, "POST", "/v1/messages?beta=true", anthropic_turn(first))
    assert (status, media) == (200, "application/json")
    answer = json.loads(body)
    assert answer["content"][1]["input"] == {"command": "touch marker.txt"}
    second = [
        *first,
        {"role": "assistant", "content": answer["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_scripted_0001"}],
        },
    ]
    status, media, body = call(model, "POST", "/v1/messages", anthropic_turn(second, stream=True))
    assert (status, media) == (200, "text/event-stream")
    assert b'"text":"Done it."' in body and body.endswith(
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    assert call(model, "GET", "/nowhere")[0] == 404
    records = model.requests
    assert [r["serial"] for r in records] == [1, 2, 3]
    assert [r["status"] for r in records] == [200, 200, 404]
    assert records[0]["query"] == {"beta": "true"}
    assert (records[0]["dialect"], records[0]["operation"]) == ("anthropic", "turn")
    assert records[0]["raw"] == anthropic_turn(first)
    assert records[0]["request"]["tools"] == ["Bash"]
    assert records[0]["reply"]["toolCalls"][0]["name"] == "Bash"
    assert records[1]["reply"] == {"turn": 1, "text": "Done it."}
    assert "dialect" not in records[2]
    written = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert written == records


def test_each_dialect_is_served_at_once(model: ScriptedModel) -> None:
    gemini = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
              "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}  # fmt: skip
    path = "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    status, media, body = call(model, "POST", path, gemini)
    assert (status, media) == (200, "text/event-stream")
    parts = json.loads(body.decode().removeprefix("data: "))["candidates"][0]["content"]["parts"]
    assert parts[1]["functionCall"]["args"] == {"command": "touch marker.txt"}
    codex = {
        "model": "m",
        "stream": False,
        "input": "go",
        "tools": [{"type": "function", "name": "x"}],
    }
    status, _, body = call(model, "POST", "/v1/responses", codex)
    assert json.loads(body)["output"][0]["content"][0]["text"] == "Nothing left."
    assert model.requests[-1]["reply"]["note"].startswith("turn 1 waits")
    status, _, body = call(model, "GET", "/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert json.loads(body)["data"][0]["type"] == "model"
    status, _, body = call(model, "POST", "/v1beta/models/g:countTokens", {"contents": []})
    assert json.loads(body)["totalTokens"] >= 1


def test_a_gzip_body_is_read(model: ScriptedModel) -> None:
    body = gzip.compress(json.dumps(anthropic_turn([{"role": "user", "content": "go"}])).encode())
    status, _, _ = call(
        model, "POST", "/v1/messages", raw=body, headers={"Content-Encoding": "gzip"}
    )
    assert status == 200
    assert model.requests[-1]["reply"]["turn"] == 0


@pytest.mark.parametrize(
    ("headers", "raw", "status"),
    [
        ({"Host": "example.com"}, b"{}", 403),
        ({"Origin": "http://127.0.0.1"}, b"{}", 403),
        ({}, b"not json", 400),
        ({}, b"[1]", 400),
        ({"Content-Encoding": "br"}, b"{}", 415),
        ({"Content-Encoding": "gzip"}, b"not gzip", 400),
        ({}, b'{"messages": 5}', 400),
        ({"Content-Length": str(MAX_BODY + 1)}, b"{}", 413),
    ],
)
def test_refusals_are_recorded(
    model: ScriptedModel, headers: dict[str, str], raw: bytes, status: int
) -> None:
    found, media, body = call(model, "POST", "/v1/messages", raw=raw, headers=headers)
    assert (found, media) == (status, "application/json")
    assert json.loads(body)["error"]["message"]
    assert model.requests[-1]["status"] == status
    assert model.stepper.next_turn == 0


def test_concurrent_requests_each_get_one_turn(tmp_path: Path) -> None:
    script = {"turns": [{"text": f"turn {n}"} for n in range(8)]}
    with start_scripted_model(script) as running:
        texts: list[str] = []

        def one() -> None:
            turn = anthropic_turn([{"role": "user", "content": "go"}])
            texts.append(
                json.loads(call(running, "POST", "/v1/messages", turn)[2])["content"][0]["text"]
            )

        threads = [threading.Thread(target=one) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(texts) == sorted(f"turn {n}" for n in range(8))
        assert sorted(r["serial"] for r in running.requests) == list(range(1, 9))


def test_closing_frees_the_port_and_a_script_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    assert load_script(path) == SCRIPT
    running = start_scripted_model(path)
    port = running.port
    running.close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))
    with start_scripted_model(SCRIPT, port=port) as again:
        assert again.port == port


def test_the_command_serves_until_interrupted(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    record = tmp_path / "requests.jsonl"
    command = [sys.executable, "-m", "bundle_server.model", str(script), "--record", str(record)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    ) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            host, port = url.removeprefix("http://").split(":")
            assert host == "127.0.0.1"
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            turn = json.dumps(anthropic_turn([{"role": "user", "content": "go"}]))
            connection.request("POST", "/v1/messages", turn, {"Content-Type": "application/json"})
            assert connection.getresponse().status == 200
            connection.close()
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()
    assert json.loads(record.read_text().splitlines()[0])["reply"]["turn"] == 0


def test_the_command_refuses_a_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"turns": [{}]}', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "bundle_server.model", str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "ModelScript" in done.stderr


def test_each_session_plays_the_script_from_its_first_turn() -> None:
    from bundle_server.model import ScriptedModels

    models = ScriptedModels(SCRIPT)
    first, second = models.start(), models.start()
    try:
        assert first.url != second.url
        for model in (first, second):
            host, port = model.url.removeprefix("http://").split(":")
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            turn = json.dumps(anthropic_turn([{"role": "user", "content": "go"}]))
            connection.request("POST", "/v1/messages", turn, {"Content-Type": "application/json"})
            assert connection.getresponse().status == 200
            connection.close()
        assert [r["reply"]["turn"] for r in models.requests] == [0, 0]
    finally:
        models.close()
    with pytest.raises(RuntimeError, match="closed"):
        models.start()
    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection("127.0.0.1", first.port, timeout=5).request("GET", "/")
