"""Canonical skill tokens: `classify_skill_token` and the Skill components (seed 001).

A skill token is how someone names a skill: a suite (`{"skill": "demo:review"}`), a person
typing `/review` or `$demo:review`, a host's own call (`Skill` with `demo:review`,
`activate_skill` with `review`). The grammar is spec/schemas/SkillToken.json: an optional sigil,
then a qualified name `<plugin>:<skill>` or a bare `<skill>`, the plugin part an application id,
the skill part a SkillDefinition name.

    >>> token = classify_skill_token("/demo:review")
    >>> (token.form, token.sigil, token.plugin, token.skill, token.canonical)
    ('qualified', '/', 'demo', 'review', 'demo:review')
    >>> resolve_skill_token("$review", ["demo:review"], "host_c").name
    'review'

What a person types for a skill is the host's: each host row lists its typed forms (hosts.toml
[host.plugin] `skill_typed`: a sigil and a spelling), and `typed_forms` fills them in; the
grammar's sigils are those of the hosts' typed forms (Vocabulary.json skillSigil). How the host
loads a skill is its own too: `skill_tool` (hosts.toml `skill_call`, or `no_skill_call` saying
why a host has none).

    >>> typed_forms("host_a", "demo:review")
    ('/demo:review',)

Resolution (`resolve_skill_token`) is the same on every host; the host only decides how the
resolved skill is spelled (hosts.toml [host.plugin] `skill_name`):

- the sigil never changes what a token names;
- a qualified token names the skill with both parts equal;
- a bare token names the skills with that skill part, whatever their plugin: one is
  `resolved`, several `ambiguous` (the candidates are their qualified spellings);
- no match is `unknown`, its candidates the closest names (limits.toml skill-token-candidates).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from bundle_contract._derived import skill_sigils
from bundle_contract._generated.errors import SkillTokenInvalid
from bundle_contract._host_plugin import host_row
from bundle_contract._spec import get_spec, plain

Form = Literal["qualified", "bare"]
Status = Literal["resolved", "unknown", "ambiguous"]

# A host row without `skill_name` names a skill by its bare name (requirements.toml API-205).
BARE_SPELLING = "{skill}"


@dataclass(frozen=True, slots=True)
class SkillToken:
    """One classified skill token (SkillToken.json): its components and canonical spelling."""

    text: str
    form: Form
    sigil: str | None
    plugin: str | None
    skill: str
    canonical: str

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "form": self.form,
            "sigil": self.sigil,
            "plugin": self.plugin,
            "skill": self.skill,
            "canonical": self.canonical,
        }


@dataclass(frozen=True, slots=True)
class SkillResolution:
    """What a token names among some skills for one host (SkillResolution.json)."""

    token: SkillToken
    host: str
    status: Status
    skill: SkillToken | None  # the skill named, as it was given (no sigil); None unless resolved
    name: str | None  # the host's spelling of it (None unless resolved, or if it lacks a plugin)
    candidates: tuple[str, ...]
    message: str

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    def to_json(self) -> dict[str, Any]:
        return {
            "token": self.token.to_json(),
            "host": self.host,
            "status": self.status,
            "skill": None if self.skill is None else self.skill.canonical,
            "name": self.name,
            "candidates": list(self.candidates),
            "message": self.message,
        }


@dataclass(frozen=True)
class _Grammar:
    sigils: tuple[str, ...]
    separator: str
    plugin: re.Pattern[str]
    plugin_max: int
    skill: re.Pattern[str]
    skill_max: int


def _follow(document: Mapping[str, Any], schemas: Mapping[str, Any]) -> Mapping[str, Any]:
    """A `$defs` member with its one `$ref` (to another schema's subschema) followed."""
    ref = document.get("$ref")
    if ref is None:
        return document
    name, _, pointer = str(ref).partition("#")
    found: Any = schemas[name.removesuffix(".json")]
    for part in pointer.strip("/").split("/"):
        found = found[part]
    return _follow(found, schemas)


@cache
def _grammar() -> _Grammar:
    schemas = plain(get_spec().schemas)
    defs = schemas["SkillToken"]["$defs"]
    plugin, skill = _follow(defs["pluginName"], schemas), _follow(defs["skillName"], schemas)
    return _Grammar(
        sigils=tuple(skill_sigils(get_spec())),
        separator=defs["separator"]["const"],
        plugin=re.compile(plugin["pattern"], re.ASCII),
        plugin_max=plugin["maxLength"],
        skill=re.compile(skill["pattern"], re.ASCII),
        skill_max=skill["maxLength"],
    )


def _part_problem(kind: str, part: str, pattern: re.Pattern[str], maximum: int) -> str | None:
    if not part:
        return f"no {kind} name"
    if len(part) > maximum:
        return f"the {kind} name is longer than {maximum} characters"
    # fullmatch: with search or match, the pattern's `$` would let a trailing newline through.
    if pattern.fullmatch(part) is None:
        return f"the {kind} name {part!r} does not match {pattern.pattern}"
    return None


def classify_skill_token(text: str) -> SkillToken:
    """Split `text` into a SkillToken; SkillTokenInvalid when it is outside the grammar."""
    if not isinstance(text, str):
        raise SkillTokenInvalid(f"a skill token is a string, not {type(text).__name__}")
    grammar = _grammar()
    rest = text
    sigil = next((s for s in grammar.sigils if text.startswith(s)), None)
    if sigil is not None:
        rest = text[len(sigil) :]
    plugin: str | None
    if grammar.separator in rest:
        plugin, _, skill = rest.partition(grammar.separator)
    else:
        plugin, skill = None, rest
    problem = _part_problem("skill", skill, grammar.skill, grammar.skill_max)
    if plugin is not None:
        problem = _part_problem("plugin", plugin, grammar.plugin, grammar.plugin_max) or problem
    if problem is not None:
        sigils = " or ".join(repr(s) for s in grammar.sigils)
        raise SkillTokenInvalid(
            f"{text!r} is not a skill token ({problem}): an optional {sigils}, then"
            f" <plugin>{grammar.separator}<skill> or <skill>",
            {"token": text},
        )
    if plugin is None:
        return SkillToken(text, "bare", sigil, None, skill, skill)
    return SkillToken(text, "qualified", sigil, plugin, skill, rest)


def _filled(template: str, skill: SkillToken) -> str | None:
    """`template` with {plugin} and {skill} of `skill`; None when it needs a plugin part
    `skill` lacks."""
    if "{plugin}" in template and skill.plugin is None:
        return None
    return template.replace("{plugin}", skill.plugin or "").replace("{skill}", skill.skill)


def skill_spelling(host: str, skill: SkillToken) -> str | None:
    """How `host` names `skill` (hosts.toml [host.plugin] skill_name, its {plugin} and {skill}
    filled in); None when the spelling needs a plugin part `skill` lacks. ValueError for an
    unknown host kind."""
    return _filled(str(host_row(host).get("plugin", {}).get("skill_name", BARE_SPELLING)), skill)


def typed_forms(host: str, skill: SkillToken | str) -> tuple[str, ...]:
    """What a person types in `host`'s prompt for `skill` (a token or its text; its sigil, if
    any, is not kept): each of the host's typed forms (hosts.toml [host.plugin] skill_typed),
    its sigil then its spelling filled in, in the row's order. A form needing a plugin part
    `skill` lacks is left out; a host with no typed forms has none. ValueError for an unknown
    host kind, SkillTokenInvalid for a skill outside the grammar."""
    token = _as_token(skill)
    forms = host_row(host).get("plugin", {}).get("skill_typed", ())
    typed = [(form["sigil"], _filled(str(form["spelling"]), token)) for form in forms]
    return tuple(dict.fromkeys(sigil + spelled for sigil, spelled in typed if spelled))


def skill_tool(host: str) -> tuple[str, str]:
    """(tool, argument): the tool through which `host` loads a skill and the argument naming
    it, by the host's spelling (hosts.toml [host.plugin] skill_call). ValueError where the host
    has none, saying how it loads a skill instead (no_skill_call), or for an unknown host."""
    plugin = host_row(host).get("plugin", {})
    call = plugin.get("skill_call")
    if call is None:
        how = plugin.get("no_skill_call")
        raise ValueError(f"{host} loads a skill without a tool call" + (f" ({how})" if how else ""))
    return str(call["tool"]), str(call["argument"])


def skill_tools() -> dict[str, tuple[str, str]]:
    """Host kind -> (tool, argument) of `skill_tool`, for every host that has one."""
    return {
        str(row["kind"]): (str(call["tool"]), str(call["argument"]))
        for row in get_spec().rows("hosts", "host")
        if (call := row.get("plugin", {}).get("skill_call")) is not None
    }


def _as_token(value: SkillToken | str) -> SkillToken:
    return value if isinstance(value, SkillToken) else classify_skill_token(value)


def _limit() -> int:
    maximum: int = get_spec().limit("skill-token-candidates")["maximum"]
    return maximum


def resolve_skill_token(
    token: SkillToken | str, skills: Iterable[SkillToken | str], host: str
) -> SkillResolution:
    """Which of `skills` (tokens or their text: `plugin:skill`, or `skill` where the plugin is
    not known) `token` names for `host`, and how the host spells it; an unknown or ambiguous
    token is a resolution saying so, with candidates. SkillTokenInvalid for a token (or a
    skill) outside the grammar, ValueError for an unknown host kind."""
    token = _as_token(token)
    host_row(host)  # an unknown host kind fails here, whatever the token
    known: dict[str, SkillToken] = {}
    for given in skills:
        skill = _as_token(given)
        known.setdefault(skill.canonical, skill)
    if token.form == "qualified":
        matches = [s for s in known.values() if (s.plugin, s.skill) == (token.plugin, token.skill)]
    else:
        matches = [s for s in known.values() if s.skill == token.skill]
    limit = _limit()
    if len(matches) == 1:
        found = matches[0]
        name = skill_spelling(host, found)
        said = f"{token.text!r} names {found.canonical}" + (
            f", which {host} calls {name!r}" if name is not None else ""
        )
        return SkillResolution(token, host, "resolved", found, name, (), said)
    if matches:
        named = tuple(sorted(s.canonical for s in matches))[:limit]
        return SkillResolution(
            token,
            host,
            "ambiguous",
            None,
            None,
            named,
            f"{token.text!r} is ambiguous: it names {', '.join(named)}; qualify it as"
            f" <plugin>{_grammar().separator}{token.skill}",
        )
    named = _closest(token, list(known.values()), limit)
    among = f"{len(known)} skill(s)" if known else "no skills"
    hint = f"; did you mean {' or '.join(named)}?" if named else ""
    return SkillResolution(
        token, host, "unknown", None, None, named, f"{token.text!r} names none of {among}{hint}"
    )


def _closest(token: SkillToken, known: list[SkillToken], limit: int) -> tuple[str, ...]:
    """Skills of the same name in another plugin first, then the names closest to the token's
    (difflib's default cutoff), at most `limit`."""
    same = [s.canonical for s in known if s.skill == token.skill]
    spellings = {s.canonical for s in known} | {s.skill for s in known}
    near = difflib.get_close_matches(token.canonical, sorted(spellings), n=limit)
    named = [s.canonical for n in near for s in known if n in (s.canonical, s.skill)]
    return tuple(dict.fromkeys(same + named))[:limit]
