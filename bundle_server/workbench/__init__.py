"""The Workbench route group: the page, the session hand-over and the OpenAPI document."""
