"""Routes of the test projects that invoke them (over HTTP and in the Workbench): the source of
their module and the config rows naming them."""

from __future__ import annotations

from typing import Any

# review: two render events, the second bearing a document; hangs: a minute's sleep (for
# cancel); floods: 300 render events of ~10 KB (past the 2 MiB window); breaks: raises.
COMMON_ROUTES = """
import time

def review(event, context):
    context.render("heading", {"text": "Review of " + event["family"]})
    context.render("summary", None, document={"title": "turn ended", "input": context.input})
    return {"family": event["family"], "input": context.input}

def hangs(event, context):
    context.render("started", None)
    time.sleep(60)

def floods(event, context):
    for index in range(300):
        context.render("line", {"index": index, "pad": "x" * 10000})
    return {"lines": 300}

def breaks(event, context):
    raise RuntimeError("the route broke")
"""


def route_rows(*names: str, module: str = "bundle_routes") -> list[dict[str, Any]]:
    """Config rows for routes `names` of `module`, each for the stop family."""
    return [{"id": name, "handler": f"{module}:{name}", "families": ["stop"]} for name in names]
