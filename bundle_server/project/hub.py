"""The project event hub: seed 001's project events with one sequence, replay and gaps.

Same mechanics as the trace hub (`SequencedHub`), with two differences of shape: a project
event already carries its own `type`, so its stream frame is the event itself, not a wrapper;
and the gap is seed 001's ProjectReplayGap (`replay.gap`, earliest available and latest
dropped sequence), not the trace's.
"""

from __future__ import annotations

from typing import Any

from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server._streams.sequenced import Record, SequencedHub, encode_frame


class ProjectHub(SequencedHub):
    """Publishes validated ProjectEvent envelopes; replays them with ProjectReplayGap."""

    name = "project event hub"
    gap_type = "replay.gap"
    items_key = "events"
    keepalive_type = "project.keepalive"

    def __init__(self, retention: int | None = None) -> None:
        super().__init__(retention or get_spec().limit("project-events-kept")["maximum"])

    def publish(self, type: str, payload: Any) -> Record:
        """Validate and publish one event; nothing is published (no number used) if invalid."""

        def build(sequence: int) -> Record:
            event = {
                "type": type,
                "sequence": sequence,
                "occurredAt": utc_timestamp(),
                "payload": payload,
            }
            validate("ProjectEvent.json", event)
            return event

        return self._append(build)

    def _encode(self, record: Record) -> tuple[bytes, bytes]:
        frame = encode_frame(record)
        return frame[:-1], frame

    def _replay(self, after: int) -> Record:
        replay = super()._replay(after)
        gap = replay.get("gap")
        if gap is not None:
            replay["gap"] = {
                "type": self.gap_type,
                "earliestAvailableSequence": gap["firstAvailableSequence"],
                "latestDroppedSequence": gap["firstAvailableSequence"] - 1,
                "requestedAfterSequence": after,
            }
        return replay
