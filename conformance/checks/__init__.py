"""The built-in checks, one module per area; importing this package registers them all.

guard       Host allowlist, exact Origin, session values, guard order (browser routes)
responses   security headers, error envelope, JSON responses (every response)
workbench   session issuance: cookie, redirect, Referrer-Policy, the page
bodies      JSON media type and strict body validation
trace       replay, entries, cursors, gaps, the NDJSON trace stream, sequences
logs        raw log replay, stream and record safety
receipts    the hook receipt route: Origin, bearer token, session ids, body limit
streams     slow subscribers and keep-alives
bounds      header count/size bounds and the header-read timeout
sessions    host sessions: list, ids, bodies, lifecycle, input, resize, the SSE stream, the cap
project     project status, the project event replay and stream, manual builds
notices     the notice ledger: the list and its filter, dismissing, the events telling each
invocations route invocations: requests, the list, the envelope, cancel, the stream, the window
runtime     development runtime runs: requests, the run record, the recent runs, one run
mcp         MCP launch lists, operations and their bodies, the correlationId's `_meta` copy,
            the MCP trace's pairs and links
mcp_apps    MCP App bindings: mount, result and cancel, races, a closed binding
"""

from conformance.checks import (  # noqa: F401  (imported to register)
    bodies,
    bounds,
    guard,
    invocations,
    logs,
    mcp,
    mcp_apps,
    notices,
    project,
    receipts,
    responses,
    runtime,
    sessions,
    streams,
    trace,
    workbench,
)
