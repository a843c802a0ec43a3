"""The Workbench route group: the page, the session hand-over and the OpenAPI document, and the
App frame (MCP App previews on an origin of their own); the `app_frame` row of
`_services.SERVICES` mounts them."""
