"""A small, complete manifest touching every member: documentation by example.

Tests build their cases by editing it and the benchmark grows it to 10,000 file rows; keeping
one example here means both always exercise a manifest the parser accepts.
"""

from __future__ import annotations

import hashlib
from typing import Any

EXAMPLE_FILES: dict[str, tuple[str, bytes]] = {
    # path -> (kind, content)
    "bin/tool.js": ("bundle", b"#!/usr/bin/env node\nconsole.log('tool')\n"),
    "hooks/wrapper.js": ("generated", b"// hook wrapper\n"),
    "mcp/server.js": ("bundle", b"// compiled MCP server\n"),
    "payloads/ui/index.js": ("prebuilt", b"// prebuilt payload\n"),
    "plugins/host_a/plugin.json": ("generated", b'{"name": "demo"}\n'),
    "routes/stop.js": ("bundle", b"// stop route\n"),
    "scripts/setup.sh": ("copy", b"#!/bin/sh\necho setup\n"),
    "web/index.html": ("copy", b"<!doctype html>\n"),
}
EXECUTABLE = frozenset({"bin/tool.js", "scripts/setup.sh"})


def example_parts() -> dict[str, Any]:
    """Every top-level member but `files` and `manifestVersion`: what an assembler is given."""
    return {
        "application": {"id": "demo", "name": "Demo bundle", "version": "1.2.3"},
        "compiler": {"name": "bundle-devkit", "recordVersion": 1, "version": "0.1.0"},
        "distribution": {
            "channels": ["npm", "local"],
            "install": {"package": "demo-bundle", "version": "^1.2.3"},
            "payloads": [
                {"id": "ui", "path": "payloads/ui", "runtimeDependencies": ["react", "left-pad"]}
            ],
        },
        "executables": {
            "bins": [{"name": "demo-tool", "path": "bin/tool.js"}],
            "hooks": [
                {"event": "Stop", "host": "host_a", "path": "hooks/wrapper.js"},
                {"event": "PreToolUse", "host": "host_a", "path": "hooks/wrapper.js"},
            ],
            "mcpServers": [
                {
                    "name": "demo",
                    "kind": "compiled",
                    "transport": "stdio",
                    "launch": {"entry": "mcp/server.js", "args": ["--stdio"]},
                },
                {
                    "name": "ui",
                    "kind": "prebuilt",
                    "transport": "stdio",
                    "launch": {"entry": "payloads/ui/index.js", "payload": "ui"},
                    "env": {"BUNDLE_PLUGIN_ROOT": "/custom/root"},
                },
                {
                    "name": "local",
                    "kind": "command",
                    "transport": "stdio",
                    "command": "sh",
                    "args": ["bundle:path:plugin-root/scripts/setup.sh"],
                    "env": {"DATA": "bundle:path:plugin-data", "WS": "bundle:path:workspace-root"},
                },
                {
                    "name": "docs",
                    "kind": "remote",
                    "transport": "streamable-http",
                    "url": "https://example.com/mcp",
                },
            ],
            "scripts": [{"name": "setup", "path": "scripts/setup.sh"}],
        },
        "projections": [
            {"target": "host_b", "root": "plugins"},
            {
                "target": "host_a",
                "root": "plugins/host_a",
                "pluginManifest": "plugins/host_a/plugin.json",
            },
        ],
        "routes": [{"event": "stop", "id": "stop", "path": "routes/stop.js"}],
        "runtime": {"node": "20.11"},
        "web": {"entry": "web/index.html"},
    }


def example_manifest() -> dict[str, Any]:
    """`example_parts()` completed with file rows computed from `EXAMPLE_FILES`: plain data."""
    data = example_parts()
    data["manifestVersion"] = 6
    data["files"] = [
        {
            "bytes": len(content),
            "kind": kind,
            "path": path,
            "sha256": hashlib.sha256(content).hexdigest(),
            **({"mode": "0755"} if path in EXECUTABLE else {}),
        }
        for path, (kind, content) in EXAMPLE_FILES.items()
    ]
    return data
