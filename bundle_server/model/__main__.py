"""`python -m bundle_server.model SCRIPT [--port N] [--record FILE] [--skill PLUGIN:SKILL ...]
[--host KIND]`: serve a ModelScript. The script's skill calls name the `--skill`s (the bundle's),
played to `--host` (default: the host whose skill tool a request offers).

Prints the URL to point a host at on stdout (and, on stderr, how each host is pointed at it),
then serves until Ctrl-C or SIGTERM. Exit codes: 0 stopped, 2 a script that cannot be read or
does not conform, or a port that cannot be bound.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from bundle_contract._error_bases import ContractError
from bundle_server.model import start_scripted_model


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bundle_server.model", description="Serve a scripted model on loopback."
    )
    parser.add_argument("script", help="a ModelScript JSON file")
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    parser.add_argument("--record", help="append every request to this JSONL file")
    parser.add_argument(
        "--skill",
        action="append",
        metavar="PLUGIN:SKILL",
        help="a skill of the bundle, for the script's skill calls to name (repeatable)",
    )
    parser.add_argument(
        "--host", help="the host kind played to (default: the one whose skill tool is offered)"
    )
    args = parser.parse_args(argv)
    try:
        model = start_scripted_model(
            args.script, port=args.port, record=args.record, skills=args.skill, host=args.host
        )
    except (OSError, ValueError, ContractError) as error:
        print(f"bundle_server.model: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Both signals only set the event, from the start: an interrupt arriving while the hints
    # print, or while the server closes, never escapes as a KeyboardInterrupt.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(model.url, flush=True)
    print(
        f"Claude Code: ANTHROPIC_BASE_URL={model.url}\n"
        f'Codex CLI: a model provider with base_url = "{model.url}/v1", wire_api = "responses"\n'
        f"Gemini CLI: GOOGLE_GEMINI_BASE_URL={model.url}\n"
        "Ctrl-C stops.",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not stop.wait(0.5):
            pass
    finally:
        model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
