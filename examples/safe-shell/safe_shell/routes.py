"""Routes: rendered for a canonical event by a route invocation."""


def stop_review(event, context=None):
    """A short review of the turn that just ended: whether a stop hook already ran for it."""
    payload = event.get("payload", {}) if isinstance(event, dict) else {}
    reentry = payload.get("reentry", {}).get("value", False)
    return {"summary": "stop hook already active" if reentry else "turn ended", "reentry": reentry}
