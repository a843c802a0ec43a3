"""The bundle's MCP server: lets the agent ask before it runs a command.

Tools: `check_command` (the hook's own rule, as a question), `check_script` (every line of a
script file; a missing file is an error the agent sees), `check_commands_slowly` (one command
per step with progress, to try cancelling a call) and `command_report` (an MCP App: its
`_meta.ui.resourceUri` names an HTML view of the verdict). A resource lists the rules, and a
prompt asks the agent to rewrite a refused command safely.
"""

import asyncio
from pathlib import Path

from mcp.server.apps import Apps
from mcp.server.mcpserver import Context, MCPServer

from safe_shell.rules import DESTRUCTIVE, why_destructive

REPORT_UI = "ui://safe-shell/report.html"
REPORT_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Command report</title>
<style>body { font: 14px system-ui, sans-serif; margin: 12px; }</style></head>
<body><h1>Command report</h1>
<p id="verdict">Waiting for the tool's result.</p>
<ol id="heard" aria-label="Notifications"></ol>
<script>
// An MCP App: ask the host to initialize, then show what the tool call brings.
const heard = document.getElementById("heard");
const verdict = document.getElementById("verdict");
function post(message) { window.parent.postMessage(message, "*"); }
window.addEventListener("message", (event) => {
  const message = event.data || {};
  if (message.jsonrpc !== "2.0") return;
  if (message.id === 1 && message.result) {
    post({ jsonrpc: "2.0", method: "ui/notifications/initialized" });
    return;
  }
  if (!message.method) return;
  const item = document.createElement("li");
  item.textContent = message.method;
  heard.append(item);
  if (message.method === "ui/notifications/tool-input") {
    verdict.textContent = "Checking " + JSON.stringify(message.params.arguments.command) + "...";
  } else if (message.method === "ui/notifications/tool-result") {
    const first = (message.params.content || [])[0];
    verdict.textContent = first && first.text ? first.text : "done";
  } else if (message.method === "ui/notifications/tool-cancelled") {
    verdict.textContent = "The call was cancelled.";
  }
});
post({ jsonrpc: "2.0", id: 1, method: "ui/initialize",
       params: { appInfo: { name: "command-report", version: "1" }, appCapabilities: {},
                 protocolVersion: "2026-01-26" } });
</script>
</body></html>
"""

# The App's tool and view are declared before the server, which takes them in as it is made.
apps = Apps()


@apps.tool(resource_uri=REPORT_UI, description="A report of `command` with an HTML view.")
def command_report(command: str) -> str:
    reason = why_destructive(command)
    return f"{command!r} is refused: {reason}" if reason else f"{command!r} may run"


apps.add_html_resource(REPORT_UI, REPORT_HTML)
server = MCPServer("safe-shell", extensions=[apps])


@server.tool()
def check_command(command: str) -> str:
    """Say whether safe-shell would refuse `command`, and why."""
    reason = why_destructive(command)
    return f"refused: {reason}" if reason else "allowed"


@server.tool()
def check_script(path: str) -> list[str]:
    """Check each line of the shell script at `path`; the refused lines, with why."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()  # a missing file is an error
    found = ((number, why_destructive(line)) for number, line in enumerate(lines, 1))
    return [f"line {number}: {reason}" for number, reason in found if reason]


@server.tool()
async def check_commands_slowly(commands: list[str], seconds: float, ctx: Context) -> list[str]:
    """Check `commands` one per `seconds`, reporting progress (a call that can be cancelled)."""
    verdicts = []
    for index, command in enumerate(commands):
        await asyncio.sleep(seconds)
        await ctx.report_progress(index + 1, len(commands), f"checked {command}")
        verdicts.append(check_command(command))
    return verdicts


@server.resource("safe-shell://rules", mime_type="text/plain", description="What is refused")
def rules() -> str:
    return "\n".join(reason for reason, _ in DESTRUCTIVE)


@server.prompt()
def make_safe(command: str) -> str:
    """Ask for a safe way to do what a refused command meant to do."""
    reason = why_destructive(command) or "nothing"
    return f"safe-shell refuses `{command}` because it {reason}. Suggest a safer command."
