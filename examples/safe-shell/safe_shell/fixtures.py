"""Event fixtures: native hook payloads a route can be invoked with from the Workbench or the
API (`eventFixture: {"fixtureId": "..."}`), decoded exactly as a host's hook would be."""

FIXTURES = {
    "turn-ended": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": False}},
    "stop-reentered": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": True}},
}
