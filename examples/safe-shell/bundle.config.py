"""The safe-shell bundle: refuses destructive shell commands before a coding agent runs them."""

from bundle_contract import define_config, define_skill

config = define_config(
    {
        "application": {
            "id": "safe-shell",
            "name": "Safe shell",
            "version": "0.1.0",
            "description": "Stops a coding agent from running destructive shell commands.",
            "author": {"name": "bundle-devkit examples"},
        },
        "targets": ["host_a", "host_b", "host_c"],
        "hooks": {
            "sessionStart": "safe_shell.hooks:session_start",
            "beforeTool": {"handler": "safe_shell.hooks:before_tool", "timeout": 5},
            "stop": "safe_shell.hooks:stop",
        },
        "routes": [
            {
                "id": "stop-review",
                "handler": "safe_shell.routes:stop_review",
                "families": ["stop"],
                # What `input` may be (checked before the route runs; absent input is null).
                "inputSchema": {
                    "type": ["object", "null"],
                    "properties": {"verbose": {"type": "boolean"}},
                    "additionalProperties": False,
                },
            }
        ],
        "mcpServers": [
            {"name": "safe-shell", "kind": "compiled", "server": "safe_shell.server:server"}
        ],
        # Fixtures for invoking the routes (Workbench, POST /api/routes/invocations).
        "dev": {"contracts": {"fixtures": "safe_shell/fixtures.py"}},
        "skills": [
            define_skill(
                {
                    "name": "shell-safety",
                    "description": "How to run shell commands this bundle will not refuse.",
                    "directory": "skills/shell-safety",
                }
            )
        ],
    }
)
