"""A hook command for the real-host tests: `python3 hook.py EVENT` (stdlib only).

It appends the JSON the host wrote on stdin as one line to $HOOK_CAPTURE/EVENT.jsonl, then
answers by the first rule of $HOOK_REPLIES (a JSON file: {EVENT: [rule, ...]}) that fits:
a rule fits when its `nth` (if any) is this call's number for EVENT, counting from 1, and its
`contains` (if any) is in the raw stdin. It writes the rule's `stdout` and `stderr` and exits
with its `exit` (0 by default); no rule fits: nothing written, exit 0.
"""

import json
import os
import sys

event = sys.argv[1]
raw = sys.stdin.read()
capture = os.environ.get("HOOK_CAPTURE")
number = 1
if capture:
    os.makedirs(capture, exist_ok=True)
    path = os.path.join(capture, f"{event}.jsonl")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            number += sum(1 for _ in file)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(json.loads(raw) if raw.strip() else None) + "\n")
replies = os.environ.get("HOOK_REPLIES")
rules = []
if replies:
    with open(replies, encoding="utf-8") as file:
        rules = json.load(file).get(event, [])
for rule in rules:
    if rule.get("nth", number) == number and rule.get("contains", "") in raw:
        sys.stdout.write(rule.get("stdout", ""))
        sys.stderr.write(rule.get("stderr", ""))
        sys.exit(rule.get("exit", 0))
