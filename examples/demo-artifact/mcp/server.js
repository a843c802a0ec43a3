// compiled MCP server
