"""Generated from spec/ by `python -m bundle_contract generate`. Do not edit."""

TRACE_ERROR_MESSAGE_MAX = 500
FAMILIES = (
    "session/start",
    "tool/before",
    "tool/after",
    "stop",
    "agent/start",
    "agent/stop",
    "workspace/open",
    "session/end",
    "prompt/submit",
    "tool/failure",
    "compact/before",
    "compact/after",
    "permission/request",
    "permission/denied",
    "stop/failure",
    "file/change",
    "config/change",
    "task/create",
    "task/complete",
    "agent/idle",
    "model-switch/before",
    "model-switch/after",
)
HOST_KINDS = (
    "host_a",
    "host_b",
    "host_c",
    "host_d",
)
HANDLER_EVENTS = (
    "sessionStart",
    "beforeTool",
    "afterTool",
    "stop",
    "agentStart",
    "agentStop",
)
