"""The bundle's MCP server: lets the agent ask before it runs a command."""

from mcp.server.mcpserver import MCPServer

from safe_shell.rules import why_destructive

server = MCPServer("safe-shell")


@server.tool()
def check_command(command: str) -> str:
    """Say whether safe-shell would refuse `command`, and why."""
    reason = why_destructive(command)
    return f"refused: {reason}" if reason else "allowed"
