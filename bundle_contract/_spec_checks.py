"""Cross-reference checks over the loaded tables.

The meta-schemas check each row's shape; these check what one row says about another: a route
names existing schemas and codes, a family names existing fields, a host names existing
families. Each check yields problem lines naming file and row; `load_spec` collects them all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from bundle_contract._derived import family_fields, limit_schema
from bundle_contract._spec import Spec, row_label

GENERATED_SCHEMAS = ("Limits.json", "Vocabulary.json")
VOCABULARY_DEFS = ("family", "hostKind", "sessionHost", "handlerEvent", "errorCode")
PATH_PARAM = re.compile(r"\{([A-Za-z][A-Za-z0-9]*)\}")


def _duplicates(spec: Spec, table: str, key: str, ident: Callable[[Any], object]) -> Iterator[str]:
    rows = spec.rows(table, key)
    counts = Counter(ident(row) for row in rows)
    for index, row in enumerate(rows):
        if counts[ident(row)] > 1:
            yield f"{row_label(table, key, index, row)}: duplicate {ident(row)!r}"


def _codes(spec: Spec) -> set[str]:
    return {row["code"] for row in spec.rows("errors", "error")}


def check_errors(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "errors", "error", lambda r: r["code"])
    yield from _duplicates(spec, "errors", "error", lambda r: r["name"])
    for index, row in enumerate(spec.rows("errors", "error")):
        label = row_label("errors", "error", index, row)
        own_code = row["source"] == "decision" or "code" in row.get("decided", ())
        if row["code"].startswith("AB") and own_code:
            yield f"{label}: the AB space is the seeds'; a code of ours uses BX"
        if row["code"].startswith("BX") and not own_code:
            yield f"{label}: a BX code is ours: mark it source = decision or decided = [code]"
        if "rule" in row and row["rule"] not in {r["id"] for r in spec.rows("hooks", "rule")}:
            yield f"{label}: no rule {row['rule']} in hooks.toml"


def schema_ref_problem(spec: Spec, ref: str) -> str | None:
    """Why a route's schema ref does not resolve, or None when it does."""
    name, _, fragment = ref.partition("#")
    if name == "Limits.json":
        ids = {r["id"] for r in spec.rows("limits", "limit") if limit_schema(r) is not None}
        wanted = fragment.removeprefix("/$defs/")
        return None if wanted in ids else f"no schema-expressible limit {wanted!r}"
    if name == "Vocabulary.json":
        wanted = fragment.removeprefix("/$defs/")
        return None if wanted in VOCABULARY_DEFS else f"no vocabulary {wanted!r}"
    if name.removesuffix(".json") not in spec.schemas:
        return f"no schema {name} in spec/schemas/"
    return None


def check_limits(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "limits", "limit", lambda r: r["id"])
    routes = {r["id"] for r in spec.rows("routes", "route")}
    for index, row in enumerate(spec.rows("limits", "limit")):
        for route in row["routes"]:
            if route not in routes:
                yield f"{row_label('limits', 'limit', index, row)}: unknown route {route!r}"


def check_routes(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "routes", "route", lambda r: r["id"])
    yield from _duplicates(spec, "routes", "route", lambda r: (r["method"], r["path"]))
    codes = _codes(spec)
    groups = {g["name"] for g in spec.rows("routes", "group")}
    auths = {a["name"] for a in spec.rows("routes", "auth")}
    limits = {r["id"] for r in spec.rows("limits", "limit")}
    for index, auth in enumerate(spec.rows("routes", "auth")):
        for code in auth["errors"]:
            if code not in codes:
                yield f"{row_label('routes', 'auth', index, auth)}: unknown code {code}"
    for section in ("request", "body"):
        for code in spec.tables["routes"][section]["errors"]:
            if code not in codes:
                yield f"routes.toml: {section}: unknown code {code}"
    for index, route in enumerate(spec.rows("routes", "route")):
        label = row_label("routes", "route", index, route)
        if route["group"] not in groups:
            yield f"{label}: unknown group {route['group']!r}"
        if route["auth"] not in auths:
            yield f"{label}: unknown auth class {route['auth']!r}"
        request_error = [route["request_error"]] if "request_error" in route else []
        for code in [*route["errors"], *request_error]:
            if code not in codes:
                yield f"{label}: unknown code {code}"
        if "body_limit" in route and route["body_limit"] not in limits:
            yield f"{label}: unknown limit {route['body_limit']!r}"
        if set(PATH_PARAM.findall(route["path"])) != set(route.get("params", {})):
            yield f"{label}: path parameters and `params` differ"
        yield from (f"{label}: {p}" for p in _route_ref_problems(spec, route))
        yield from (f"{label}: {p}" for p in _transport_problems(route))


def _route_refs(route: Any) -> Iterator[str]:
    yield from route.get("params", {}).values()
    yield from (q["schema"] for q in route.get("query", {}).values())
    if "request" in route:
        yield route["request"]
    for response in route["responses"].values():
        yield from (response[k] for k in ("schema", "items", "frame") if k in response)
        yield from response.get("events", {}).values()


def _route_ref_problems(spec: Spec, route: Any) -> Iterator[str]:
    for ref in _route_refs(route):
        problem = schema_ref_problem(spec, ref)
        if problem:
            yield problem


def _transport_problems(route: Any) -> Iterator[str]:
    for status, response in route["responses"].items():
        if "events" in response and route["transport"] != "sse":
            yield f"response {status} names SSE events on a {route['transport']} route"
        if "frame" in response and route["transport"] != "ndjson":
            yield f"response {status} names an NDJSON frame on a {route['transport']} route"
        terminal = response.get("terminal_event")
        if terminal is not None and terminal not in response["events"]:
            yield f"response {status}: terminal event {terminal!r} is not one of its events"
    if route["method"] == "GET" and "request" in route:
        yield "a GET route cannot take a body"


def _kinds(spec: Spec) -> set[str]:
    return {k["name"] for k in spec.rows("events", "kind")}


def check_events(spec: Spec) -> Iterator[str]:
    for key in ("kind", "decode", "field", "family"):
        yield from _duplicates(spec, "events", key, lambda r: r["name"])
    kinds = _kinds(spec)
    fields = {f["name"] for f in spec.rows("events", "field")}
    for index, field in enumerate(spec.rows("events", "field")):
        if field["kind"] not in kinds:
            yield f"{row_label('events', 'field', index, field)}: unknown kind {field['kind']!r}"
    for name in spec.tables["events"]["base"]:
        if name not in fields:
            yield f"events.toml: base: unknown field {name!r}"
    for index, family in enumerate(spec.rows("events", "family")):
        for name in family["fields"]:
            if name != "base" and name not in fields:
                label = row_label("events", "family", index, family)
                yield f"{label}: unknown field {name!r}"


def check_hooks(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "hooks", "event", lambda r: r["name"])
    yield from _duplicates(spec, "hooks", "result", lambda r: r["event"])
    yield from _duplicates(spec, "hooks", "rule", lambda r: r["id"])
    kinds = _kinds(spec) | {"host-kind"}
    families = {f["name"] for f in spec.rows("events", "family")}
    events = [e["name"] for e in spec.rows("hooks", "event")]
    for index, event in enumerate(spec.rows("hooks", "event")):
        label = row_label("hooks", "event", index, event)
        if event["family"] not in families:
            yield f"{label}: unknown family {event['family']!r}"
        for field in [*event["required"], *event["optional"]]:
            if field["kind"] not in kinds:
                yield f"{label}: field {field['name']}: unknown kind {field['kind']!r}"
    for key in ("common_field", "context_field"):
        for index, field in enumerate(spec.rows("hooks", key)):
            if field["kind"] not in kinds:
                yield f"{row_label('hooks', key, index, field)}: unknown kind {field['kind']!r}"
    matrix = [r["event"] for r in spec.rows("hooks", "result")]
    if sorted(matrix) != sorted(events):
        yield "hooks.toml: result: the matrix must have exactly one row per handler event"
    rule_ids = sorted(r["id"] for r in spec.rows("hooks", "rule"))
    if rule_ids != list(range(1, len(rule_ids) + 1)):
        yield "hooks.toml: rule: ids must run 1..N"


def check_hosts(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "hosts", "host", lambda r: r["kind"])
    families = {f["name"] for f in spec.rows("events", "family")}
    fields = {f["name"] for f in spec.rows("events", "field")}
    decodes = {d["name"] for d in spec.rows("events", "decode")}
    for index, host in enumerate(spec.rows("hosts", "host")):
        label = row_label("hosts", "host", index, host)
        for name in host["common_keys"]:
            if name not in fields:
                yield f"{label}: common_keys: unknown field {name!r}"
        seen: Counter[str] = Counter(e["family"] for e in host["event"])
        for family, count in seen.items():
            if count > 1:
                yield f"{label}: family {family!r} mapped twice"
        for event in host["event"]:
            where = f"{label}: event {event['native']!r}"
            if event["family"] not in families:
                yield f"{where}: unknown family {event['family']!r}"
            for name in [*event.get("keys", {}), *event.get("omit", ())]:
                if name not in fields:
                    yield f"{where}: unknown field {name!r}"
            for name, step in event.get("decode", {}).items():
                if step not in decodes:
                    yield f"{where}: unknown decode step {step!r}"
                if name not in event.get("keys", {}) and name not in host["common_keys"]:
                    yield f"{where}: decode for {name!r}, which the host does not send"


# The placeholders a hook_output row may use -> the result part whose value each carries
# (None: any part may use it). A part's row must carry its own and no other part's.
OUTPUT_PLACEHOLDERS = {
    "$native": None,
    "$reason": "deny",
    "$updatedInput": "updatedInput",
    "$additionalContext": "additionalContext",
}
PART_PLACEHOLDER = {part: name for name, part in OUTPUT_PLACEHOLDERS.items() if part is not None}
MATRIX_PARTS = (
    ("deny", "deny"),
    ("updated_input", "updatedInput"),
    ("additional_context", "additionalContext"),
)


def payload_fields(spec: Spec) -> dict[str, str]:
    """Handler payload field -> its kind, over the common fields and every event's own."""
    fields = {f["name"]: f["kind"] for f in spec.rows("hooks", "common_field")}
    for event in spec.rows("hooks", "event"):
        for field in [*event["required"], *event["optional"]]:
            fields.setdefault(field["name"], field["kind"])
    return fields


def check_payload_sources(spec: Spec) -> Iterator[str]:
    """Every handler payload field has exactly one source, and a canonical source can supply it."""
    fields = payload_fields(spec)
    canonical_kinds = {f["name"]: f["kind"] for f in spec.rows("events", "field")}
    family_lists = family_fields(spec)
    sourced: Counter[str] = Counter()
    for index, row in enumerate(spec.rows("hooks", "payload_source")):
        label = row_label("hooks", "payload_source", index, row)
        if "canonical" in row and len(row["fields"]) != 1:
            yield f"{label}: `canonical` renames one field; list it alone"
        for name in row["fields"]:
            sourced[name] += 1
            if name not in fields:
                yield f"{label}: {name!r} is not a handler payload field"
                continue
            if row["from"] != "canonical":
                continue
            canonical = row.get("canonical", name)
            if canonical not in canonical_kinds:
                yield f"{label}: {name}: no canonical field {canonical!r}"
            elif canonical_kinds[canonical] != fields[name]:
                yield (
                    f"{label}: {name} is of kind {fields[name]}, canonical {canonical} of kind "
                    f"{canonical_kinds[canonical]}"
                )
            for event in spec.rows("hooks", "event"):
                required = {f["name"] for f in event["required"]}
                if name in required and canonical not in family_lists.get(event["family"], ()):
                    yield (
                        f"{label}: {event['name']} requires {name}, but its family "
                        f"{event['family']} does not list {canonical}"
                    )
    for name in fields:
        if sourced[name] != 1:
            yield f"hooks.toml: payload_source: field {name!r} has {sourced[name]} sources, not 1"


def check_host_plugins(spec: Spec) -> Iterator[str]:
    """Plugin documents, payload keys and hook outputs of each host row."""
    native_fields = {
        name
        for row in spec.rows("hooks", "payload_source")
        if row["from"] == "native"
        for name in row["fields"]
    }
    for index, host in enumerate(spec.rows("hosts", "host")):
        label = row_label("hosts", "host", index, host)
        plugin = host["plugin"]
        if plugin["hooks_document"] in (plugin["manifest"], plugin["mcp_document"]):
            yield f"{label}: plugin: the hooks document shares its path with another document"
        if plugin["mcp_document"] == plugin["manifest"]:
            tops = {path.split(".")[0] for path in plugin["manifest_fields"]}
            if plugin["mcp_key"] in tops:
                yield f"{label}: plugin: mcp_key {plugin['mcp_key']!r} clashes with the manifest"
        for name in host.get("payload_keys", {}):
            if name not in native_fields:
                yield f"{label}: payload_keys: {name!r} is no payload field read from a native key"
        yield from (f"{label}: {p}" for p in _hook_output_problems(spec, host))


def _hook_output_problems(spec: Spec, host: Any) -> Iterator[str]:
    served = {event["family"] for event in host["event"]}
    rows = host["hook_output"]
    for index, row in enumerate(rows):
        where = f"hook_output[{index}] ({row['result']})"
        for family in row.get("families", ()):
            if family not in served:
                yield f"{where}: the host serves no family {family!r}"
        values = row.get("set", {})
        for path, value in values.items():
            if isinstance(value, str) and value.startswith("$"):
                if value not in OUTPUT_PLACEHOLDERS:
                    yield f"{where}: {path}: unknown placeholder {value!r}"
                elif OUTPUT_PLACEHOLDERS[value] not in (None, row["result"]):
                    yield f"{where}: {path}: {value} belongs to another result part"
            if any(other.startswith(path + ".") for other in values):
                yield f"{where}: {path} is both a value and an object"
        wanted = PART_PLACEHOLDER.get(row["result"])
        if "set" in row and wanted is not None and wanted not in values.values():
            yield f"{where}: the document never carries {wanted}"
    # Each part a handler event may return needs exactly one row for the family it serves: a
    # row naming the family, else exactly one row naming none.
    matrix = {r["event"]: r for r in spec.rows("hooks", "result")}
    for event in spec.rows("hooks", "event"):
        family = event["family"]
        allowed = matrix.get(event["name"])
        if family not in served or allowed is None:
            continue  # a matrix without the event is check_hooks' to report
        parts = ["continue"] + [p for column, p in MATRIX_PARTS if allowed[column]]
        for part in parts:
            named = [r for r in rows if r["result"] == part and family in r.get("families", ())]
            general = [r for r in rows if r["result"] == part and "families" not in r]
            count = len(named) or len(general)
            if count != 1:
                yield f"{family}: {count} hook_output rows answer {part} for {event['name']}, not 1"


def check_states(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "states", "machine", lambda r: r["name"])
    codes = _codes(spec)
    for index, machine in enumerate(spec.rows("states", "machine")):
        label = row_label("states", "machine", index, machine)
        known = {*machine["states"], *machine.get("groups", {}), "none", "any"}
        for name, members in machine.get("groups", {}).items():
            for member in members:
                if member not in machine["states"]:
                    yield f"{label}: group {name!r}: unknown state {member!r}"
        for t in machine["transition"]:
            sources = [t["from"]] if isinstance(t["from"], str) else list(t["from"])
            for state in [*sources, t["to"]]:
                if state not in known and state != "unchanged":
                    yield f"{label}: transition {t['trigger']!r}: unknown state {state!r}"
            if "error" in t and t["error"] not in codes:
                yield f"{label}: transition {t['trigger']!r}: unknown code {t['error']}"


def check_requirements(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "requirements", "requirement", lambda r: r["id"])


def check_runtime(spec: Spec) -> Iterator[str]:
    yield from _duplicates(spec, "runtime", "file", lambda r: r["id"])
    yield from _duplicates(spec, "runtime", "variable", lambda r: r["name"])
    yield from _duplicates(spec, "runtime", "variable", lambda r: r["role"])
    for index, row in enumerate(spec.rows("runtime", "file")):
        problem = schema_ref_problem(spec, row["schema"])
        if problem:
            yield f"{row_label('runtime', 'file', index, row)}: {problem}"


def check_schema_ids(spec: Spec) -> Iterator[str]:
    from bundle_contract._derived import DIALECT
    from bundle_contract._spec import SCHEMA_BASE

    for name, document in spec.schemas.items():
        if document.get("$id") != f"{SCHEMA_BASE}{name}.json":
            yield f"schemas/{name}.json: $id must be {SCHEMA_BASE}{name}.json"
        # One dialect: the reference validator's registry holds the resources without it.
        if document.get("$schema") != DIALECT:
            yield f"schemas/{name}.json: $schema must be {DIALECT}"
        if f"{name}.json" in GENERATED_SCHEMAS:
            yield f"schemas/{name}.json: {name} is generated from the tables; remove the file"


CHECKS: tuple[Callable[[Spec], Iterable[str]], ...] = (
    check_errors,
    check_limits,
    check_routes,
    check_events,
    check_hooks,
    check_hosts,
    check_payload_sources,
    check_host_plugins,
    check_states,
    check_runtime,
    check_requirements,
    check_schema_ids,
)


def cross_reference_problems(spec: Spec) -> Iterator[str]:
    # The canonical-event checks compute seed rule 5 (payload field admission) over hosts.toml.
    from bundle_contract._canonical import admission_problems, native_event_problems
    from bundle_contract._host_plugin import hook_format_problems

    for check in (*CHECKS, admission_problems, native_event_problems, hook_format_problems):
        yield from check(spec)
