"""A third party's description of its target: what it does where the seeds leave things open.

    # target.toml: every key is optional; command-line options override the file
    profile = "seed"                         # or "devkit": every decision of ours
    decisions = ["error-envelope"]           # decisions of ours the target follows as well
    cookie = "sid_{port}"                    # the session cookie's name
    receipt_auth = "X-Receipt-Token: {token}" # the receipt credential header
    receipt_template = "receipt.json"        # a receipt it accepts, relative to this file
    publish = "command"                      # how the kit makes trace entries: receipt, command
    publish_command = ["./publish-entry", "{requestId}"]
    document_route = "review"                # a route that completes with an Agent Document
    long_route = "hangs"                     # a route that runs long enough to cancel
    flood_route = "floods"                   # a route producing more render events than the
                                             # render-history window holds
    route_input = '{"verbose": true}'        # the input sent to those routes, JSON text (else
                                             # made from each route's inputSchema)
    mcp_server = "tools"                     # one of its MCP servers the kit may talk to
    mcp_tool = "echo"                        # a tool of that server the kit may call
    mcp_arguments = '{"text": "kit"}'        # the call's arguments, a JSON object ({})
    mcp_meta_tool = "seen_meta"              # a tool of it answering the `_meta` it received
    mcp_crash_tool = "crash"                 # a tool of it whose call ends the server's process
    mcp_slow_tool = "slow"                   # a tool of it whose call takes several seconds
    mcp_slow_arguments = '{"seconds": 30}'   # that call's arguments, a JSON object ({})

`bundle-conformance decisions` lists the decision names and the checks that need each.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from bundle_contract._command import reason
from conformance._receipt import template_problem

KEYS = {
    "profile": str,
    "decisions": list,
    "cookie": str,
    "receipt_auth": str,
    "receipt_template": str,
    "publish": str,
    "publish_command": list,
    "document_route": str,
    "long_route": str,
    "flood_route": str,
    "route_input": str,
    "mcp_server": str,
    "mcp_tool": str,
    "mcp_arguments": str,
    "mcp_meta_tool": str,
    "mcp_crash_tool": str,
    "mcp_slow_tool": str,
    "mcp_slow_arguments": str,
}


def load(path: Path) -> dict[str, Any]:
    """The file's settings as `Target` keyword arguments; ValueError naming the fault."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: {reason(exc)}") from None
    for key, value in data.items():
        if key not in KEYS:
            raise ValueError(f"{path}: unknown key {key!r} (known: {', '.join(KEYS)})")
        if not isinstance(value, KEYS[key]):
            raise ValueError(f"{path}: {key} must be a {KEYS[key].__name__}")
    found = dict(data)
    if "decisions" in found:
        found["declared"] = frozenset(map(str, found.pop("decisions")))
    if "publish_command" in found:
        found["publish_command"] = tuple(map(str, found["publish_command"]))
    if "receipt_template" in found:
        found["receipt_template"] = template(path.parent / found["receipt_template"])
    return found


def template(path: Path) -> Any:
    """A receipt template: a JSON object whose strings may hold `{requestId}`, `{executionId}`
    and `{sessionId}` (where the BUNDLE_DEV_SESSION value goes), and no other placeholder. It
    must carry `{requestId}`: the kit finds its entries by it."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"receipt template {path}: {reason(exc)}") from None
    problem = template_problem(found)
    if problem is not None:
        raise ValueError(f"receipt template {path}: {problem}")
    return found
