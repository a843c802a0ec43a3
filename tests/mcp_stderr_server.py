"""A real MCP server (the official SDK, over stdio) whose tools write to stderr, for the tests of
server output as log records (tests/test_server_output_records.py):

- `breaks` raises an exception out of the tool (chained to its cause): the SDK answers isError
  and logs the exception with its traceback to stderr (through Rich, where it is installed);
- `prints_traceback` prints a chained traceback itself (traceback.print_exc) and answers;
- `warns` prints a warning that goes on over indented lines, and answers.
"""

from __future__ import annotations

import sys
import traceback

from mcp.server.mcpserver import MCPServer

server = MCPServer("loud")


def parse(text: str) -> int:
    return int(text)


def read(text: str) -> int:
    try:
        return parse(text)
    except ValueError as error:
        raise RuntimeError("cannot read it") from error


@server.tool()
def breaks() -> str:
    """Raises: the SDK logs the traceback to stderr."""
    read("not a number")
    return "unreachable"


@server.tool()
def prints_traceback() -> str:
    """Prints a chained traceback to stderr, then answers."""
    try:
        read("not a number")
    except RuntimeError:
        traceback.print_exc()
    return "printed"


@server.tool()
def warns(text: str) -> str:
    """Prints a warning over three lines to stderr, then answers."""
    print(f"WARNING: {text}\n  first detail\n  second detail", file=sys.stderr, flush=True)
    return text


if __name__ == "__main__":
    server.run(transport="stdio")
