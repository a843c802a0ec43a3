"""Hook handlers. Each receives the handler payload and the HookHandlerContext and returns a
hook result (or nothing, which continues)."""

from safe_shell.rules import why_destructive

SHELL_TOOLS = {"Bash", "shell", "exec_command", "run_shell_command"}


def session_start(payload, context):
    """Tell the agent up front what this bundle refuses."""
    return {
        "additionalContext": "safe-shell is active: destructive shell commands"
        " (rm -rf /, mkfs, dd to a device, force-push) are refused."
    }


def before_tool(payload, context):
    """Refuse a destructive shell command, with the reason the agent will see."""
    if payload["toolName"] not in SHELL_TOOLS:
        return None
    tool_input = payload["toolInput"]
    command = tool_input.get("command", "") if isinstance(tool_input, dict) else ""
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    reason = why_destructive(str(command))
    if reason is None:
        return None
    return {"outcome": "deny", "reason": f"safe-shell: `{command}` {reason}"}


def stop(payload, context):
    """Before the agent stops, make it take back a destructive command it proposed.

    A stop hook that denies keeps the agent working; `stopHookActive` says a stop hook already
    did so for this turn, and then the agent must be let go, or it would never stop.
    """
    if payload["stopHookActive"]:
        return None
    reason = why_destructive(payload.get("lastAssistantMessage") or "")
    if reason is None:
        return None
    return {
        "outcome": "deny",
        "reason": f"safe-shell: your last message proposes a command that {reason};"
        " say it must not be run, or offer a safer one",
    }
