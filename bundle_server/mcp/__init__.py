"""The MCP route group: the client side of the active epoch's MCP servers (`service`), their
sessions (`connection`, `launches`, `wire`), MCP App bindings (`apps`), the asyncio loop the
SDK runs on (`bridge`, `hub_selector`) and the routes (`handlers`); the `mcp` row of
`_services.SERVICES` mounts it."""
