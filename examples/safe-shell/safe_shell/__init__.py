"""The safe-shell bundle's code: hook handlers, a route and an MCP server."""
