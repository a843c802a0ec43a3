"""Collections of saved MCP calls: files of the project, re-run against every new epoch."""
