"""Canonical skill tokens (bundle_contract._skill_tokens; SkillToken.json, SkillResolution.json)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_contract import (
    SkillResolution,
    SkillToken,
    classify_skill_token,
    define_skill,
    resolve_skill_token,
)
from bundle_contract._generated.errors import ConfigInvalid, EvalSuiteInvalid, SkillTokenInvalid
from bundle_contract._host_attach import plugin_skills
from bundle_contract._host_plugin import host_row, plugin_files
from bundle_contract._schemas import schema_documents
from bundle_contract._skill_tokens import _grammar, skill_tool, skill_tools, typed_forms
from bundle_contract._spec import SCHEMA_BASE, get_spec
from bundle_contract._validation import problems
from bundle_server.evals.batch import ToolCall
from bundle_server.evals.graders import Evidence, tool_calls_grader
from bundle_server.evals.suite import load_suite

GRAMMAR = _grammar()
SIGILS = st.sampled_from([None, *GRAMMAR.sigils])
SKILLS = st.from_regex(GRAMMAR.skill, fullmatch=True).filter(lambda s: len(s) <= GRAMMAR.skill_max)
PLUGINS = st.from_regex(GRAMMAR.plugin, fullmatch=True).filter(
    lambda s: len(s) <= GRAMMAR.plugin_max
)
HOSTS = [row["kind"] for row in get_spec().rows("hosts", "host")]


@settings(max_examples=60, deadline=None)
@given(sigil=SIGILS, plugin=st.none() | PLUGINS, skill=SKILLS)
def test_a_token_splits_into_its_components_and_its_canonical_spelling_round_trips(
    sigil: str | None, plugin: str | None, skill: str
) -> None:
    canonical = skill if plugin is None else f"{plugin}:{skill}"
    text = (sigil or "") + canonical
    token = classify_skill_token(text)
    assert (token.text, token.sigil, token.plugin, token.skill) == (text, sigil, plugin, skill)
    assert token.form == ("bare" if plugin is None else "qualified")
    assert token.canonical == canonical
    assert problems("SkillToken.json", token.to_json()) == []
    again = classify_skill_token(token.canonical)
    assert again == dataclasses.replace(token, text=canonical, sigil=None)
    assert again.canonical == canonical


# The grammar written out once more, from the schema's parts: a token is accepted exactly
# when it matches.
WHOLE = re.compile(
    "[/$]?(?:(?:{p}):)?(?:{s})".format(
        p=GRAMMAR.plugin.pattern.strip("^$"), s=GRAMMAR.skill.pattern.strip("^$")
    )
)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab-.:_/$ Z9\n", max_size=12))
def test_a_token_is_accepted_exactly_when_it_fits_the_grammar(text: str) -> None:
    fits = WHOLE.fullmatch(text) is not None
    try:
        token = classify_skill_token(text)
    except SkillTokenInvalid as error:
        assert not fits, text
        assert repr(text) in error.message and error.details == {"token": text}
    else:
        assert fits, text
        assert token.text == text


@pytest.mark.parametrize("text", ["", "/", "demo:", ":x", "Review", "a b", "a:b:c", "x\n", "//x"])
def test_text_outside_the_grammar_is_told(text: str) -> None:
    with pytest.raises(SkillTokenInvalid, match="is not a skill token"):
        classify_skill_token(text)


def test_a_skill_definition_name_is_a_token_skill_part() -> None:
    assert define_skill({"name": "review-diff", "description": "x"})
    with pytest.raises(ConfigInvalid):
        define_skill({"name": "demo:review", "description": "x"})


BUNDLE = ["demo:shell-safety", "demo:review-diff"]


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize(
    "text", ["shell-safety", "demo:shell-safety", "/shell-safety", "$demo:shell-safety"]
)
def test_every_form_resolves_to_the_skill_as_each_host_names_it(host: str, text: str) -> None:
    resolution = resolve_skill_token(text, BUNDLE, host)
    template = host_row(host)["plugin"].get("skill_name", "{skill}")
    spelled = template.replace("{plugin}", "demo").replace("{skill}", "shell-safety")
    assert resolution.status == "resolved" and resolution.resolved
    assert resolution.skill == classify_skill_token("demo:shell-safety")
    assert resolution.name == spelled and resolution.candidates == ()
    assert problems("SkillResolution.json", resolution.to_json()) == []


def test_the_real_hosts_spellings() -> None:
    # Claude Code and Codex name plugin skills <plugin>:<skill>; Gemini CLI by the bare name.
    names = {host: resolve_skill_token("$shell-safety", BUNDLE, host).name for host in HOSTS}
    assert names["host_a"] == names["host_b"] == "demo:shell-safety"
    assert names["host_c"] == "shell-safety"


def test_each_host_types_a_skill_as_its_rows_say() -> None:
    # Claude Code: the slash command /<plugin>:<skill>; Codex: the mention $<plugin>:<skill>;
    # Gemini CLI: an extension's skill command /<extension>:<skill>; Cursor's row names none.
    forms = {host: typed_forms(host, "safe-shell:shell-safety") for host in HOSTS}
    assert forms == {
        "host_a": ("/safe-shell:shell-safety",),
        "host_b": ("$safe-shell:shell-safety",),
        "host_c": ("/safe-shell:shell-safety",),
        "host_d": (),
    }
    # Any token of the skill will do; a form needing the plugin part is left out without one.
    typed = classify_skill_token("/safe-shell:shell-safety")
    assert typed_forms("host_b", typed) == forms["host_b"]
    assert typed_forms("host_a", "shell-safety") == ()
    with pytest.raises(ValueError, match="unknown host kind"):
        typed_forms("host_z", "demo:x")
    with pytest.raises(SkillTokenInvalid):
        typed_forms("host_a", "Shell Safety")


@pytest.mark.parametrize("host", HOSTS)
def test_every_typed_form_is_a_token_naming_its_skill(host: str) -> None:
    rows = host_row(host)["plugin"].get("skill_typed", [])
    typed = typed_forms(host, "demo:shell-safety")
    assert len(typed) == len(rows)
    for form, text in zip(rows, typed, strict=True):
        token = classify_skill_token(text)
        assert token.sigil == form["sigil"] and token.text == text
        assert problems("SkillToken.json", token.to_json()) == []
        assert resolve_skill_token(token, BUNDLE, host).skill == classify_skill_token(
            "demo:shell-safety"
        )


def test_the_grammar_has_the_sigils_of_the_hosts_typed_forms_and_no_other() -> None:
    typed = {
        form["sigil"]
        for row in get_spec().rows("hosts", "host")
        for form in row["plugin"].get("skill_typed", ())
    }
    vocabulary = schema_documents()[f"{SCHEMA_BASE}Vocabulary.json"]["$defs"]["skillSigil"]
    assert set(GRAMMAR.sigils) == typed == set(vocabulary["enum"]) == {"/", "$"}
    outside = {"text": "#x", "form": "bare", "sigil": "#", "plugin": None, "skill": "x"}
    assert problems("SkillToken.json", outside | {"canonical": "x"}) != []
    with pytest.raises(SkillTokenInvalid):
        classify_skill_token("#x")


def test_each_host_loads_a_skill_through_its_tool_or_says_how_it_does_without() -> None:
    assert skill_tools() == {"host_a": ("Skill", "skill"), "host_c": ("activate_skill", "name")}
    assert skill_tool("host_a") == ("Skill", "skill")
    with pytest.raises(ValueError, match=r"^host_b loads a skill without a tool call \(Codex"):
        skill_tool("host_b")
    with pytest.raises(ValueError, match=r"^host_d loads a skill without a tool call$"):
        skill_tool("host_d")


def test_a_skill_without_its_plugin_has_no_name_where_the_host_needs_one() -> None:
    assert resolve_skill_token("review", ["review"], "host_a").name is None
    assert resolve_skill_token("review", ["review"], "host_c").name == "review"
    assert resolve_skill_token("demo:review", ["review"], "host_c").status == "unknown"


def test_an_unknown_token_names_the_closest_skills() -> None:
    typo = resolve_skill_token("shell-safty", BUNDLE, "host_a")
    assert typo.status == "unknown" and typo.skill is None and typo.name is None
    assert typo.candidates == ("demo:shell-safety",)
    assert "did you mean demo:shell-safety?" in typo.message
    elsewhere = resolve_skill_token("/other:review-diff", BUNDLE, "host_a")
    assert elsewhere.candidates[0] == "demo:review-diff"
    nothing = resolve_skill_token("zzz", [], "host_c")
    assert nothing.candidates == () and nothing.message == "'zzz' names none of no skills"
    assert problems("SkillResolution.json", nothing.to_json()) == []


def test_an_ambiguous_token_names_every_candidate_within_the_limit() -> None:
    two = resolve_skill_token("/review", ["b:review", "a:review", "a:other"], "host_c")
    assert two.status == "ambiguous" and two.name is None
    assert two.candidates == ("a:review", "b:review")
    assert "qualify it as <plugin>:review" in two.message
    limit = get_spec().limit("skill-token-candidates")["maximum"]
    many = resolve_skill_token("x", [f"p{i}:x" for i in range(limit + 3)], "host_a")
    assert len(many.candidates) == limit
    assert problems("SkillResolution.json", many.to_json()) == []
    assert resolve_skill_token("a:review", ["b:review", "a:review"], "host_a").resolved


def test_resolution_refuses_an_unknown_host_and_bad_skills() -> None:
    with pytest.raises(ValueError, match="unknown host kind"):
        resolve_skill_token("x", ["x"], "host_z")
    with pytest.raises(SkillTokenInvalid):
        resolve_skill_token("x", ["Not A Skill"], "host_a")
    assert isinstance(
        resolve_skill_token(SkillToken("x", "bare", None, None, "x", "x"), ["x"], "host_a"),
        SkillResolution,
    )


def _evidence(tmp_path: Path, host: str, call: ToolCall, skills: Any) -> Evidence:
    return Evidence(
        workspace=tmp_path,
        final_message="done",
        exit_code=0,
        signal=None,
        hooks=[],
        tool_calls=[call],
        trial={},
        commands=None,  # type: ignore[arg-type]  # no grader here runs a command
        host=host,
        plugin="demo",
        skills=skills,
    )


CALLS = {
    "host_a": ToolCall("Skill", {"skill": "demo:shell-safety"}),
    "host_c": ToolCall("activate_skill", {"name": "shell-safety"}),
}


@pytest.mark.parametrize("host", sorted(CALLS))
@pytest.mark.parametrize(
    "text", ["shell-safety", "demo:shell-safety", "/shell-safety", "$shell-safety"]
)
def test_a_grader_takes_any_token_that_names_the_skill(
    tmp_path: Path, host: str, text: str
) -> None:
    evidence = _evidence(tmp_path, host, CALLS[host], ("shell-safety", "review-diff"))
    grader = {"type": "toolCalls", "calls": [{"skill": text}]}
    assert tool_calls_grader(grader, evidence)[0] is True


def test_a_grader_tells_an_unknown_skill_and_a_missing_bundle(tmp_path: Path) -> None:
    evidence = _evidence(tmp_path, "host_a", CALLS["host_a"], ("shell-safety",))
    passed, said = tool_calls_grader(
        {"type": "toolCalls", "calls": [{"skill": "/shell-safty"}]}, evidence
    )
    assert not passed
    assert said == (
        "the bundle's skills: '/shell-safty' names none of 1 skill(s);"
        " did you mean demo:shell-safety?"
    )
    passed, said = tool_calls_grader(
        {"type": "toolCalls", "calls": [{"skill": "other:shell-safety"}]}, evidence
    )
    assert not passed and "did you mean demo:shell-safety?" in said
    bare = _evidence(tmp_path, "host_a", CALLS["host_a"], None)
    passed, said = tool_calls_grader({"type": "toolCalls", "calls": [{"skill": "x"}]}, bare)
    assert not passed and said == "no built bundle says which skills 'x' may name"


def test_a_suite_with_a_malformed_skill_token_does_not_load(tmp_path: Path) -> None:
    grader = {"type": "toolCalls", "calls": [{"skill": "Shell Safety"}]}
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"name": "s", "cases": [{"id": "a", "prompt": "x", "graders": [grader]}]})
    )
    with pytest.raises(
        EvalSuiteInvalid, match=r"graders\[0\]: 'Shell Safety' is not a skill token"
    ):
        load_suite(path)
    # So does a case script's skill call.
    script = {"turns": [{"toolCalls": [{"skill": "/Shell"}]}]}
    case = {
        "id": "a",
        "prompt": "x",
        "script": script,
        "graders": [{"type": "exit", "exitCode": 0}],
    }
    path.write_text(json.dumps({"name": "s", "cases": [case]}))
    with pytest.raises(
        EvalSuiteInvalid, match=r"cases\[0\]\.script\.turns\[0\]\.toolCalls\[0\]\.skill: '/Shell'"
    ):
        load_suite(path)


def test_a_plugin_directory_lists_its_skills_as_the_host_names_them(tmp_path: Path) -> None:
    for host in HOSTS:
        app = {"id": "demo", "name": "Demo", "version": "1.0.0"}
        plugin = tmp_path / host
        for relative, data in plugin_files(host, application=app, hooks=(), mcp_servers={}).items():
            (plugin / relative).parent.mkdir(parents=True, exist_ok=True)
            (plugin / relative).write_bytes(data)
        skills = plugin / host_row(host)["plugin"]["skills_dir"]
        for name in ("review-diff", "shell-safety"):
            (skills / name).mkdir(parents=True)
            (skills / name / "SKILL.md").write_text("---\nname: x\n---\n", encoding="utf-8")
        (skills / "notes").mkdir()  # no SKILL.md: not a skill
        assert plugin_skills(host, plugin) == ["demo:review-diff", "demo:shell-safety"]
