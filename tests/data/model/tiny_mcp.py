"""A tiny stdio MCP server (stdlib only) with one tool, `echo`, for the real-host tests.

`python3 tiny_mcp.py [LOG]`: each call appends its arguments as a JSON line to LOG, when given
(an argument, not an environment variable: Codex passes its MCP servers only a few of its own).
"""

import json
import sys

TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(message: dict) -> dict | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-06-18")
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tiny", "version": "0.1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        arguments = message.get("params", {}).get("arguments", {})
        log = sys.argv[1] if len(sys.argv) > 1 else None
        if log:
            with open(log, "a", encoding="utf-8") as file:
                file.write(json.dumps(arguments) + "\n")
        text = f"echo: {arguments.get('text', '')}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        return {"jsonrpc": "2.0", "id": ident, "error": error}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


for line in sys.stdin:
    if line.strip():
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
