"""Generate source modules from spec/ (`python -m bundle_contract generate`).

Generated modules are committed: they keep hook-time imports free of TOML parsing and schema
compilation. `generate --check` (run by the tests) fails when a module is stale.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bundle_contract._spec import Spec, load_spec, plain

GENERATED = Path(__file__).with_name("_generated")
HEADER = '"""Generated from spec/ by `python -m bundle_contract generate`. Do not edit."""\n'


def errors_module(spec: Spec) -> str:
    lines = [
        HEADER,
        "from __future__ import annotations",
        "",
        "from bundle_contract._error_bases import (",
        "    ContractError,",
        "    DiagnosticError,",
        "    HookResultError,",
        "    RequestError,",
        ")",
        "",
        "TYPE_CHECKING = False  # typing stays off the hook-time path",
        "if TYPE_CHECKING:",
        "    from typing import ClassVar",
        "",
    ]
    rows = spec.rows("errors", "error")
    for row in rows:
        lines += ["", f"class {row['name']}({row['base']}):", *_docstring(row["condition"]), ""]
        lines.append(f'    code: ClassVar[str] = "{row["code"]}"')
        lines.append(f"    http_status: ClassVar[int] = {row['http_status']}")
        if "variants" in row:
            lines.append("    variants: ClassVar[dict[str, int]] = {")
            lines += [f'        "{v["when"]}": {v["http_status"]},' for v in row["variants"]]
            lines.append("    }")
        if "rule" in row:
            lines.append(f"    rule: ClassVar[int | None] = {row['rule']}")
        lines.append("")
    lines += [
        "",
        "ERRORS: dict[str, type[ContractError]] = {",
        *(f'    "{row["code"]}": {row["name"]},' for row in rows),
        "}",
        "",
        "__all__ = [",
        '    "ERRORS",',
        *(f'    "{name}",' for name in sorted(r["name"] for r in rows)),
        "]",
    ]
    return "\n".join(_tidy(lines)) + "\n"


def _docstring(text: str) -> list[str]:
    wrapped = textwrap.wrap(text[0].upper() + text[1:] + ".", width=88)
    if len(wrapped) == 1:
        return [f'    """{wrapped[0]}"""']
    return ['    """' + wrapped[0], *(f"    {line}" for line in wrapped[1:]), '    """']


def _tidy(lines: list[str]) -> list[str]:
    # Collapse the blank-line runs the templates above produce into PEP 8 spacing.
    out: list[str] = []
    for line in lines:
        if line == "" and len(out) >= 2 and out[-1] == "" and out[-2] == "":
            continue
        out.append(line)
    while out and out[-1] == "":
        out.pop()
    return out


def hook_results_module(spec: Spec) -> str:
    """The matrix of hooks.toml and, compiled from HookResults.json, one checker per event."""
    # Imported here: generation needs the registry; the generated module needs neither.
    from bundle_contract._compile import generate_module
    from bundle_contract._schemas import def_ref, schema_documents, schema_uri

    fields = spec.tables["hooks"]["result_fields"]
    matrix = {
        row["event"]: (row["additional_context"], row["deny"], row["updated_input"])
        for row in spec.rows("hooks", "result")
    }
    keys = tuple(sorted(name for name in fields if name != "unknown_keys"))
    schemas = {event: {"$ref": schema_uri(def_ref("HookResults", event))} for event in matrix}
    compiled = generate_module(schemas, schema_documents().__getitem__)
    lines = [
        HEADER,
        "# The matrix of spec/hooks.toml: event -> (additionalContext, deny, updatedInput).",
        f"MATRIX = {matrix!r}",
        f"OUTCOMES = {tuple(fields['outcome']['values'])!r}",
        f"CONTINUE = {fields['outcome']['continuing']!r}",
        f"DENY = {fields['outcome']['denying']!r}",
        f"REFUSED = {tuple(fields['outcome']['refused'])!r}",
        f"RESULT_KEYS = {keys!r}",
        "",
        compiled.rstrip("\n"),
        "",
        "IS_VALID = {name: pair[0] for name, pair in VALIDATORS.items()}",
    ]
    return "\n".join(lines) + "\n"


def vocabulary_module(spec: Spec) -> str:
    """What a hook wrapper needs without loading the spec: families, hosts, handler events,
    and the bound of a summarized error's message."""
    families = tuple(row["name"] for row in spec.rows("events", "family"))
    hosts = tuple(row["kind"] for row in spec.rows("hosts", "host"))
    events = tuple(row["name"] for row in spec.rows("hooks", "event"))
    message_limit = spec.limit("trace-error-message")["maximum"]
    lines = [HEADER, f"TRACE_ERROR_MESSAGE_MAX = {message_limit}"]
    for name, values in (("FAMILIES", families), ("HOST_KINDS", hosts), ("HANDLER_EVENTS", events)):
        # One item a line with a trailing comma: the form ruff format keeps as it is.
        lines += [f"{name} = (", *(f"    {json.dumps(v)}," for v in values), ")"]
    return "\n".join(lines) + "\n"


def canonical_tables_module(spec: Spec) -> str:
    """events.toml and hosts.toml as literals: decoding native payloads at hook time needs
    them, and parsing and checking the whole spec there would cost half a second."""
    lines = [
        HEADER,
        f"EVENTS = {plain(spec.tables['events'])!r}",
        f"HOSTS = {plain(spec.tables['hosts'])!r}",
    ]
    return "\n".join(lines) + "\n"


def runtime_module(spec: Spec) -> str:
    """What the hook wrapper's receipt post needs from runtime.toml, routes.toml, limits.toml
    and SessionToken.json, as literals: the wrapper runs on every tool call and must not load
    the spec (TOML parsing, schema registry) to learn a file name and two numbers."""
    receipt_route = spec.route("trace.receipts")
    constants: list[tuple[str, object, str]] = [
        ("DEV_LINK_PATH", spec.file("dev-link")["path"], "beside the installed bundle"),
        ("RECEIPT_ENDPOINT_PATH", spec.file("receipt-endpoint")["path"], "under the project"),
        ("RECEIPT_ROUTE_PATH", receipt_route["path"], "the only path a token is posted to"),
        ("RECEIPT_URL_VARIABLE", spec.variable("receipt-url"), "set for spawned simulations"),
        ("RECEIPT_TOKEN_VARIABLE", spec.variable("receipt-token"), "set with the one above"),
        ("HOST_SESSION_VARIABLE", spec.variable("host-session-id"), "a receipt's sessionId"),
        ("PLUGIN_ROOT_VARIABLE", spec.variable("plugin-root"), "the installed bundle's root"),
        ("RECEIPT_BODY_MAX_BYTES", spec.limit("receipt-body")["maximum"], "limit receipt-body"),
        ("WRAPPER_POST_MS", spec.limit("wrapper-post-time")["maximum"], "wrapper-post-time"),
        ("TOKEN_MAX_CHARS", spec.schemas["SessionToken"]["maxLength"], "SessionToken.json"),
        (
            "ARTIFACT_SOURCES",
            spec.tables["runtime"]["artifact"]["sources"],
            "the project's modules in an artifact",
        ),
    ]
    lines = [HEADER]
    for name, value, why in constants:
        lines.append(f"{name} = {json.dumps(value)}  # {why}")
    return "\n".join(lines) + "\n"


def commands_module(spec: Spec) -> str:
    """What every command needs before it may load the spec, as literals: its exit codes by
    class (runtime.toml [[exit]]) and the bounds of what argparse checks. `--help` and a usage
    error must answer at once, and loading the spec costs a second on a busy machine."""
    port = spec.schemas["StartOptions"]["properties"]["port"]
    lines = [HEADER]
    for row in spec.rows("runtime", "exit"):
        name = "EXIT_" + row["class"].upper().replace("-", "_")
        lines.append(f"{name} = {row['code']}  # runtime.toml [[exit]] {row['class']}")
    lines.append(f"PORT_MINIMUM = {port['minimum']}  # StartOptions.json port")
    lines.append(f"PORT_MAXIMUM = {port['maximum']}  # StartOptions.json port")
    return "\n".join(lines) + "\n"


def hook_io_module(spec: Spec) -> str:
    """What the hook wrapper reads and writes, as literals: per host kind and handler event,
    where each payload field comes from (hooks.toml payload_source over hosts.toml); per host
    kind and family, how each result part is written natively (hosts.toml hook_output); the
    wrapper's limits and failure policy; and, compiled, the payload schemas and decode inputs.
    The wrapper runs on every tool call and must not load the spec or jsonschema."""
    from bundle_contract._canonical import effective_keys
    from bundle_contract._compile import generate_module
    from bundle_contract._derived import family_fields
    from bundle_contract._schemas import def_ref, schema_documents, schema_uri

    hooks = spec.tables["hooks"]
    families = family_fields(spec)
    sources = {
        name: (row["from"], row.get("canonical", name))
        for row in spec.rows("hooks", "payload_source")
        for name in row["fields"]
    }
    common = [f["name"] for f in spec.rows("hooks", "common_field")]
    from bundle_contract._derived import unsent_fields

    unsent = unsent_fields(spec)
    present: dict[str, dict[str, tuple[str, ...]]] = {}
    bindings: dict[str, dict[str, object]] = {}
    outputs: dict[str, dict[str, dict[str, object]]] = {}
    for host in spec.rows("hosts", "host"):
        by_family = {row["family"]: row for row in host["event"]}
        per_event: dict[str, object] = {}
        per_family: dict[str, dict[str, object]] = {}
        for event in spec.rows("hooks", "event"):
            row = by_family.get(event["family"])
            if row is None:
                continue  # the host has no native event for this handler event
            keys = effective_keys(host, row)
            decode = row.get("decode", {})
            native_keys = host.get("payload_keys", {})
            fields = []
            for name in [*common, *(f["name"] for f in [*event["required"], *event["optional"]])]:
                origin, canonical = sources[name]
                if origin == "native":
                    if name in native_keys:
                        step = host.get("payload_decode", {}).get(name)
                        fields.append((name, native_keys[name], step))
                elif canonical in families[event["family"]] and canonical in keys:
                    fields.append((name, keys[canonical], decode.get(canonical)))
            per_event[event["name"]] = (row["native"], event["family"], tuple(fields))
            bound = {name for name, _key, _step in fields}
            must = tuple(n for n in unsent.get(event["name"], ()) if n in bound)
            if must:
                present.setdefault(host["kind"], {})[event["name"]] = must
            per_family[event["family"]] = _output_parts(host["hook_output"], event["family"])
        bindings[host["kind"]] = per_event
        outputs[host["kind"]] = per_family
    wrapper = hooks["wrapper"]
    required = {
        event["name"]: tuple(
            [f["name"] for f in spec.rows("hooks", "common_field") if f["required"]]
            + [f["name"] for f in event["required"]]
        )
        for event in spec.rows("hooks", "event")
    }
    empty_answers = {
        h["kind"]: h["empty_answer"] for h in spec.rows("hosts", "host") if "empty_answer" in h
    }
    payloads = {
        event["name"]: {"$ref": schema_uri(def_ref("HookPayloads", event["name"]))}
        for event in spec.rows("hooks", "event")
    }
    accepts = {
        f"decode:{row['name']}": plain(row["accepts"]) for row in spec.rows("events", "decode")
    }
    compiled = generate_module({**payloads, **accepts}, schema_documents().__getitem__)
    receipt = spec.schemas["EventTraceReceipt"]["properties"]
    lines = [
        HEADER,
        "# host kind -> handler event -> (native event, family, ((payload field, native key,",
        "# decode step or None), ...)), in payload field order (hooks.toml payload_source).",
        f"BINDINGS = {bindings!r}",
        "# host kind -> family -> result part -> ((path, value), ...), or None where the host",
        "# cannot carry the part (hosts.toml hook_output, rows for the family winning).",
        f"OUTPUTS = {outputs!r}",
        "# host kind -> handler event -> required fields the schema leaves optional (hooks.toml",
        "# unsent) that this host has a key for, and so must send.",
        f"PRESENT = {present!r}",
        "# handler event -> the payload fields it requires (common and its own, hooks.toml).",
        f"REQUIRED = {required!r}",
        "# host kind -> what the wrapper writes for an empty answer (hosts.toml empty_answer).",
        f"EMPTY_ANSWERS = {empty_answers!r}",
        "# handler event -> the canonical family it serves (hooks.toml event rows).",
        f"EVENT_FAMILIES = { {e['name']: e['family'] for e in spec.rows('hooks', 'event')}!r}",
        f"DEFAULT_TIMEOUT_MS = {spec.limit('hook-wrapper-timeout')['maximum']!r}",
        f"MARGIN_MS = {spec.limit('hook-wrapper-margin')['maximum']!r}",
        f"NATIVE_INPUT_MAX_BYTES = {spec.limit('hook-native-input-bytes')['maximum']!r}",
        f"FAILURE_PHASE = {wrapper['phase']!r}",
        f"LINEAGE_AXIS = {wrapper['lineage_axis']!r}",
        f"RECEIPT_VERSION = {receipt['version']['const']!r}",
        "",
        compiled.rstrip("\n"),
        "",
        "PAYLOAD_CHECKS = {name: VALIDATORS[name] for name in " + repr(tuple(payloads)) + "}",
        "DECODE_ACCEPTS = {name.partition(':')[2]: VALIDATORS[name][0] for name in "
        + repr(tuple(accepts))
        + "}",
    ]
    return "\n".join(lines) + "\n"


def _output_parts(rows: Any, family: str) -> dict[str, object]:
    """Result part -> its (path, value) pairs for `family`, or None where unsupported."""
    parts: dict[str, object] = {}
    for part in ("continue", "deny", "updatedInput", "additionalContext"):
        named = [r for r in rows if r["result"] == part and family in r.get("families", ())]
        general = [r for r in rows if r["result"] == part and "families" not in r]
        chosen = (named or general or [None])[0]
        if chosen is None:
            continue  # the matrix never lets this family's handler event return the part
        if chosen.get("unsupported", False):
            parts[part] = None
        else:
            parts[part] = tuple(
                (tuple(path.split(".")), value) for path, value in sorted(chosen["set"].items())
            )
    return parts


def spec_digest_module(spec: Spec) -> str:
    return (
        '"""The digest of the spec files `bundle-contract generate` checked (see _spec.py)."""\n'
        "\n"
        f"CHECKED = {json.dumps(spec.digest)}\n"
    )


MODULES: dict[str, Callable[[Spec], str]] = {
    "errors.py": errors_module,
    "hook_results.py": hook_results_module,
    "vocabulary.py": vocabulary_module,
    "canonical_tables.py": canonical_tables_module,
    "runtime.py": runtime_module,
    "commands.py": commands_module,
    "hook_io.py": hook_io_module,
    "spec_digest.py": spec_digest_module,
}


def generate(check: bool = False) -> list[str]:
    """Write (or with `check`, compare) every generated module; returns the stale ones.
    The spec is checked whatever its digest: this is where the digest is recorded."""
    spec = load_spec(check=True)
    stale = []
    for name, build in MODULES.items():
        path = GENERATED / name
        text = build(spec)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            stale.append(name)
            if not check:
                path.write_text(text, encoding="utf-8")
    return stale
