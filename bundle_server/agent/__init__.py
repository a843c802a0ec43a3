"""The agent endpoint: an MCP server of the development server's own, for the coding agent in
a host session (`endpoint`), and its tools (`tools`); no HTTP routes. Off by default; the
`agent` row of `_services.SERVICES` mounts it when asked for."""
