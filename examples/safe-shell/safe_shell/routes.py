"""Routes: rendered for a canonical event by a route invocation."""


def stop_review(event, context=None):
    """A short review of the turn that just ended: whether a stop hook already ran for it.
    With `{"verbose": true}` as input it also renders the event it was given."""
    payload = event.get("payload", {}) if isinstance(event, dict) else {}
    reentry = payload.get("reentry", {}).get("value", False)
    summary = "stop hook already active" if reentry else "turn ended"
    options = getattr(context, "input", None) or {}
    if context is not None:
        if options.get("verbose"):
            context.render("event", {"host": event.get("host"), "payload": payload})
        context.render("review", None, document={"title": "Stop review", "summary": summary})
    return {"summary": summary, "reentry": reentry}
