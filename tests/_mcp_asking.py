"""A real MCP server (the official SDK) that asks our client things from its tools: the user's
input (`ctx.elicit`), a model's answer (`ctx.session.create_message`) and the roots; a tool
that fails as a tool does (`isError: true`, like the example's check_script on a bad script),
one that answers as many bytes as asked, and a prompt. For the protocol view's and the server
requests' tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _projects import config, write_project

ASKING = '''
import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("asking")


class Pet(BaseModel):
    name: str = Field(description="What it answers to")
    age: int
    friendly: bool = True
    size: Literal["small", "large"] = "small"


@server.tool()
async def adopt(kind: str, ctx: Context) -> str:
    """Asks the user to name the pet (elicitation)."""
    answer = await ctx.elicit(f"Name your {kind}", schema=Pet)
    if answer.action != "accept":
        return f"no {kind}: {answer.action}"
    pet = answer.data
    return f"{pet.name} the {pet.size} {kind}, {pet.age}, friendly={pet.friendly}"


@server.tool()
async def adopt_many(kind: str, count: int, ctx: Context) -> str:
    """Asks the user `count` questions at once: how many of each answer came back."""
    asked = (ctx.elicit(f"Name {kind} {index}", schema=Pet) for index in range(count))
    actions = [answer.action for answer in await asyncio.gather(*asked)]
    return " ".join(f"{action}={actions.count(action)}" for action in sorted(set(actions)))


@server.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Asks our client's model (sampling)."""
    try:
        asked = types.TextContent(type="text", text=question)
        said = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=asked)],
            max_tokens=64,
            system_prompt="Answer in one word.",
        )
    except Exception as error:
        return f"no answer: {error}"
    return f"model said: {said.content.text}"


@server.tool()
async def roots(ctx: Context) -> list[str]:
    listed = await ctx.session.list_roots()
    return [str(root.uri) for root in listed.roots]


@server.tool()
def check(script: str) -> str:
    """Checks a script: a bad one is a tool error."""
    if script.count("(") != script.count(")"):
        raise ValueError("bad script: unbalanced parentheses")
    return "the script is fine"


@server.tool()
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def big(size: int) -> str:
    return "b" * size


@server.prompt()
def greet(name: str) -> str:
    return f"Hello {name}"
'''


def asking_members() -> tuple[dict[str, Any], dict[str, str]]:
    """Config members (`mcpServers`) and project files for the `asking` server."""
    return (
        {"mcpServers": [{"name": "asking", "kind": "compiled", "server": "mcp_asking:server"}]},
        {"mcp_asking.py": ASKING},
    )


def asking_project(root: Path) -> Path:
    """A bundle project at root/project whose one MCP server is `asking`."""
    members, files = asking_members()
    return write_project(root / "project", config(**members), files=files)
