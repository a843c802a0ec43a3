"""Compiled validators vs jsonschema_rs and jsonschema on realistic event objects.

    python bench/bench_validators.py [--count N] [--repeat R]

Builds its own schema set (a ~30-field trace event with nested correlation objects,
enums, patterns, arrays and maps, split over two resources), generates N valid and
N invalid instances, checks that all three validators agree on every one, then times
`is_valid` of each (validators are built once, outside the timed loop) and prints
the median cost per validation and the ratios: against jsonschema_rs (the Rust
implementation, the fastest peer: above 1.0x we are faster) and against jsonschema.
If the project's spec can be loaded, it also reports how long compiling every spec
schema takes.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _peers import load_note, rust_validator_of
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from bundle_contract._compile import CompileError, compile_validators
from bundle_contract._schemas import ReferenceValidator

BASE = "https://bench.example/schema/"
HEX = "0123456789abcdef"

DEFS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": BASE + "defs.json",
    "$defs": {
        "id": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{2,63}$"},
        "uuid": {
            "type": "string",
            "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
        },
        "spanId": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
        "timestamp": {
            "type": "string",
            "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?Z$",
        },
        "count": {"type": "integer", "minimum": 0},
        "host": {"enum": ["claude-code", "codex", "cursor", "gemini", "opencode"]},
        "correlation": {
            "type": "object",
            "properties": {
                "traceId": {"$ref": "#/$defs/uuid"},
                "spanId": {"$ref": "#/$defs/spanId"},
                "parentSpanId": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/spanId"}]},
                "sessionId": {"$ref": "#/$defs/id"},
                "invocationId": {"$ref": "#/$defs/id"},
            },
            "required": ["traceId", "spanId"],
            "additionalProperties": False,
        },
    },
}

EVENT: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": BASE + "event.json",
    "title": "TraceEvent",
    "type": "object",
    "properties": {
        "id": {"$ref": "defs.json#/$defs/uuid"},
        "sequence": {"$ref": "defs.json#/$defs/count"},
        "occurredAt": {"$ref": "defs.json#/$defs/timestamp"},
        "receivedAt": {"$ref": "defs.json#/$defs/timestamp"},
        "source": {"enum": ["invocation", "kernel", "mcp", "hook", "session", "log", "diagnostic"]},
        "kind": {"type": "string", "minLength": 1, "maxLength": 64},
        "summary": {"type": "string", "maxLength": 500},
        "status": {"enum": ["ok", "error", "running"]},
        "severity": {"enum": ["debug", "info", "warning", "error"]},
        "durationMs": {"type": "number", "minimum": 0},
        "host": {"$ref": "defs.json#/$defs/host"},
        "hostVersion": {"type": "string", "pattern": "^\\d+\\.\\d+\\.\\d+(-[0-9A-Za-z.]+)?$"},
        "correlation": {"$ref": "defs.json#/$defs/correlation"},
        "cause": {"anyOf": [{"type": "null"}, {"$ref": "defs.json#/$defs/correlation"}]},
        "attempt": {"type": "integer", "minimum": 1, "maximum": 10},
        "retryable": {"type": "boolean"},
        "tags": {
            "type": "array",
            "items": {"$ref": "defs.json#/$defs/id"},
            "uniqueItems": True,
            "maxItems": 16,
        },
        "labels": {
            "type": "object",
            "propertyNames": {"pattern": "^[a-z][a-z0-9.]*$"},
            "additionalProperties": {"type": "string", "maxLength": 128},
            "maxProperties": 32,
        },
        "details": {"description": "free-form, bounded elsewhere"},
        "route": {"type": "string", "pattern": "^/"},
        "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
        "httpStatus": {"type": "integer", "minimum": 100, "maximum": 599},
        "bytesIn": {"$ref": "defs.json#/$defs/count"},
        "bytesOut": {"$ref": "defs.json#/$defs/count"},
        "user": {
            "type": "object",
            "properties": {
                "id": {"$ref": "defs.json#/$defs/id"},
                "role": {"enum": ["owner", "member", "guest"]},
            },
            "required": ["id"],
            "additionalProperties": False,
        },
        "error": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "pattern": "^[A-Z][A-Z_]*$"},
                        "message": {"type": "string"},
                    },
                    "required": ["code", "message"],
                },
            ]
        },
        "spans": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"$ref": "defs.json#/$defs/id"},
                    "startMs": {"$ref": "defs.json#/$defs/count"},
                    "endMs": {"$ref": "defs.json#/$defs/count"},
                },
                "required": ["name", "startMs"],
            },
        },
        "checksum": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "priority": {"type": "integer", "minimum": 0, "maximum": 9},
        "sampled": {"type": "boolean"},
        "region": {"type": "string", "enum": ["eu-west", "us-east", "ap-south"]},
    },
    "required": [
        "id",
        "sequence",
        "occurredAt",
        "source",
        "kind",
        "summary",
        "status",
        "host",
        "correlation",
    ],
    "additionalProperties": False,
    "if": {"properties": {"status": {"const": "error"}}},
    "then": {"required": ["error"]},
}


def registry() -> Registry[Any]:
    return Registry().with_resources(
        (doc["$id"], DRAFT202012.create_resource(doc)) for doc in (DEFS, EVENT)
    )


def retrieve(uri: str) -> Mapping[str, Any]:
    return {BASE + "defs.json": DEFS}[uri]


# --------------------------------------------------------------------------- instances


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(HEX) for _ in range(n))


def _uuid(rng: random.Random) -> str:
    return "-".join(_hex(rng, n) for n in (8, 4, 4, 4, 12))


def _ident(rng: random.Random) -> str:
    return rng.choice("abcdefgh") + "".join(
        rng.choice("abc123_-") for _ in range(rng.randint(2, 12))
    )


def _stamp(rng: random.Random) -> str:
    month, day, minute = rng.randint(1, 9), rng.randint(10, 28), rng.randint(10, 59)
    return f"2025-0{month}-{day}T12:{minute}:07.{rng.randint(0, 999)}Z"


def _correlation(rng: random.Random) -> dict[str, Any]:
    value: dict[str, Any] = {"traceId": _uuid(rng), "spanId": _hex(rng, 16)}
    if rng.random() < 0.7:
        value["parentSpanId"] = rng.choice([None, _hex(rng, 16)])
    if rng.random() < 0.7:
        value["sessionId"] = _ident(rng)
    if rng.random() < 0.5:
        value["invocationId"] = _ident(rng)
    return value


def valid_event(rng: random.Random) -> dict[str, Any]:
    status = rng.choice(["ok", "ok", "running", "error"])
    event: dict[str, Any] = {
        "id": _uuid(rng),
        "sequence": rng.randint(0, 10**6),
        "occurredAt": _stamp(rng),
        "receivedAt": _stamp(rng),
        "source": rng.choice(["invocation", "kernel", "mcp", "hook", "session"]),
        "kind": rng.choice(["tool.start", "tool.end", "render", "http.request"]),
        "summary": "handled request " + _ident(rng),
        "status": status,
        "severity": rng.choice(["debug", "info", "warning"]),
        "durationMs": rng.choice([rng.randint(0, 5000), rng.random() * 100]),
        "host": rng.choice(["claude-code", "codex", "cursor"]),
        "hostVersion": f"1.{rng.randint(0, 40)}.{rng.randint(0, 9)}",
        "correlation": _correlation(rng),
        "cause": rng.choice([None, _correlation(rng)]),
        "attempt": rng.randint(1, 3),
        "retryable": rng.random() < 0.5,
        "tags": sorted({_ident(rng) for _ in range(rng.randint(0, 5))}),
        "labels": {f"k{i}.x": _ident(rng) for i in range(rng.randint(0, 4))},
        "details": {"anything": [1, 2, {"goes": True}]},
        "route": "/api/" + _ident(rng),
        "method": rng.choice(["GET", "POST"]),
        "httpStatus": rng.choice([200, 201, 404, 500]),
        "bytesIn": rng.randint(0, 10**5),
        "bytesOut": rng.randint(0, 10**5),
        "user": {"id": _ident(rng), "role": rng.choice(["owner", "member"])},
        "spans": [
            {"name": _ident(rng), "startMs": i * 10, "endMs": i * 10 + 5}
            for i in range(rng.randint(0, 4))
        ],
        "checksum": "sha256:" + _hex(rng, 64),
        "priority": rng.randint(0, 9),
        "sampled": True,
        "region": "eu-west",
    }
    event["error"] = {"code": "TOOL_FAILED", "message": "boom"} if status == "error" else None
    return event


def _drop_error_details(event: dict[str, Any]) -> None:
    event["status"] = "error"  # if/then: an error status requires "error"
    event.pop("error", None)


# Each mutation breaks one constraint, from the top level down to nested objects.
MUTATIONS: list[Callable[[dict[str, Any]], None]] = [
    lambda e: e.__setitem__("sequence", -1),
    lambda e: e.__setitem__("sequence", True),
    lambda e: e.__setitem__("status", "unknown"),
    lambda e: e.__setitem__("unexpected", 1),
    lambda e: e.pop("summary"),
    lambda e: e.__setitem__("occurredAt", "yesterday"),
    lambda e: e["correlation"].__setitem__("spanId", "XYZ"),
    lambda e: e["correlation"].__setitem__("extra", 1),
    lambda e: e.__setitem__("tags", ["same-tag", "same-tag"]),
    lambda e: e["labels"].__setitem__("Bad Key", "v"),
    lambda e: e.__setitem__("spans", [{"name": "ok-name", "startMs": "0"}]),
    _drop_error_details,
    lambda e: e.__setitem__("httpStatus", 99.5),
    lambda e: e["user"].__setitem__("role", "admin"),
]


def invalid_event(rng: random.Random) -> dict[str, Any]:
    event = copy.deepcopy(valid_event(rng))
    rng.choice(MUTATIONS)(event)
    return event


# --------------------------------------------------------------------------- timing


def per_call_ns(check: Callable[[Any], object], instances: list[Any], repeat: int) -> float:
    """Median over ``repeat`` runs of the mean cost of one call, in nanoseconds."""

    def run() -> None:
        for x in instances:
            check(x)

    budget = 0.2  # seconds per run: enough loops to swamp timer resolution
    once = timeit.timeit(run, number=1)
    number = max(1, int(budget / max(once, 1e-9)))
    runs = timeit.repeat(run, number=number, repeat=repeat)
    return statistics.median(runs) / (number * len(instances)) * 1e9


def spec_compile_report() -> str | None:
    """Compile every schema of the project's spec, if the spec can be loaded by now."""
    try:
        from bundle_contract._schemas import schema_documents

        documents = dict(schema_documents())
    except Exception as exc:  # the spec is optional here: report and go on
        return f"spec: not loaded ({type(exc).__name__}); self-contained set only"
    named = {uri.rsplit("/", 1)[-1].removesuffix(".json"): doc for uri, doc in documents.items()}
    started = time.perf_counter()
    try:
        compile_validators(named, documents.__getitem__)
    except CompileError as exc:
        return f"spec: {len(named)} schemas, compile failed: {exc}"
    elapsed = time.perf_counter() - started
    return f"spec: compiled all {len(named)} schemas in {elapsed * 1000:.0f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="instances of each kind")
    parser.add_argument("--repeat", type=int, default=5, help="timeit repeats")
    args = parser.parse_args(argv)

    rng = random.Random(20251123)
    valid = [valid_event(rng) for _ in range(args.count)]
    invalid = [invalid_event(rng) for _ in range(args.count)]

    started = time.perf_counter()
    compiled = compile_validators({"event": EVENT}, retrieve)["event"]
    compile_ms = (time.perf_counter() - started) * 1000
    reference = ReferenceValidator(EVENT, registry=registry())
    rust = rust_validator_of(EVENT, {BASE + "defs.json": DEFS})

    # The numbers mean nothing unless every validator gives the expected answers.
    for expected, instances in ((True, valid), (False, invalid)):
        for x in instances:
            answers = (
                reference.is_valid(x),
                rust(x),
                compiled.is_valid(x),
                compiled.first_error(x) is None,
            )
            if answers != (expected,) * 4:
                print(f"validators disagree on {x!r}: {answers}", file=sys.stderr)
                return 1

    print(
        f"schema: TraceEvent ({len(EVENT['properties'])} properties), "
        f"compiled in {compile_ms:.1f} ms; {args.count} valid + {args.count} invalid instances"
    )
    print(f"{'':10}{'ours':>9}{'rs':>9}{'py':>11}{'vs rs':>8}{'vs py':>8}")
    against_rust = []
    for label, instances in (("valid", valid), ("invalid", invalid)):
        ours = per_call_ns(compiled.is_valid, instances, args.repeat)
        peer = per_call_ns(rust, instances, args.repeat)
        slow = per_call_ns(reference.is_valid, instances, args.repeat)
        against_rust.append(peer / ours)
        print(
            f"{label:10}{ours:>7.0f}ns{peer:>7.0f}ns{slow:>9.0f}ns"
            f"{peer / ours:>7.2f}x{slow / ours:>7.1f}x"
        )
    print(
        f"median against jsonschema_rs (is_valid): {statistics.median(against_rust):.2f}x"
        f" (above 1.0x: ours faster; {load_note()})"
    )
    errors = per_call_ns(compiled.first_error, invalid, args.repeat)
    print(f"first_error on invalid instances: {errors:.0f} ns")
    report = spec_compile_report()
    if report:
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
