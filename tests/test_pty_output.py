"""The output ring and the frames of one session (`bundle_server/sessions/pty/_output.py`), unit
level: what the stream tests check end to end, here over every chunking hypothesis finds."""

from __future__ import annotations

import base64
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bundle_contract._spec import get_spec
from bundle_server.sessions.pty._output import Chunk, Frame, OutputLog
from bundle_server.sessions.pty._process import READ_SIZE
from bundle_server.sessions.pty._session import COALESCE_BYTES

reads = st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=12)


@given(reads)
def test_a_chunk_encodes_its_reads_as_one_text(parts: list[bytes]) -> None:
    chunk = Chunk()
    for part in parts:
        chunk.add(part)
    frame = chunk.frame()
    whole = b"".join(parts)
    assert (frame.event, frame.data, chunk.size) == ("output", whole, len(whole))
    assert b"".join(frame.encoded) == base64.b64encode(whole)
    # Padding only at the very end: the pieces are whole 3-byte groups but the last.
    assert all(b"=" not in piece for piece in frame.encoded[:-1])


@pytest.mark.parametrize("size", [4095, 4096, 4097])
def test_a_lone_read_is_not_copied(size: int) -> None:
    chunk = Chunk()
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    chunk.add(data)
    frame = chunk.frame()
    assert frame.data is data
    assert b"".join(frame.encoded) == base64.b64encode(data)


def test_a_chunk_taken_twice_gives_the_same_frame() -> None:
    chunk = Chunk()
    chunk.add(b"abcd")
    assert chunk.frame() == chunk.frame()


def test_an_output_frame_without_its_text_is_refused() -> None:
    # The stream writes the text only: such a frame would lose its bytes without a word.
    with pytest.raises(ValueError, match="base64"):
        Frame("output", data=b"lost")


def log(capacity: int) -> OutputLog:
    return OutputLog(capacity, queue_capacity=1024, lock=threading.Lock(), queue_bytes=1 << 20)


@given(reads, st.integers(min_value=1, max_value=100))
def test_the_ring_keeps_exactly_the_newest_bytes(parts: list[bytes], capacity: int) -> None:
    ring = log(capacity)
    for part in parts:
        ring.append(Frame.output(part))
    whole = b"".join(parts)
    assert ring.retained() == whole[-capacity:]
    assert ring.total == len(whole)


def test_every_subscriber_gets_the_one_encoded_frame() -> None:
    ring = log(1024)
    first = ring.subscribe({}, None)
    second = ring.subscribe({}, None)
    ring.append(Frame.output(b"echo"))
    (one,), (other,) = first.take(), second.take()
    assert one is other  # encoded once by the reader, not once per stream
    assert one.encoded == (base64.b64encode(b"echo"),)


def test_an_empty_read_publishes_nothing() -> None:
    ring = log(16)
    subscription = ring.subscribe({}, None)
    ring.append(Frame.output(b""))
    assert (subscription.take(), ring.total, ring.retained()) == ([], 0, b"")


def test_a_live_output_event_is_never_larger_than_the_replay() -> None:
    # Each frame becomes one `output` event; a client's line buffer sized for the replay
    # (`retained-output`) holds any of them. The reader reads while its chunk is under
    # COALESCE_BYTES, and one read brings at most READ_SIZE.
    largest = COALESCE_BYTES - 1 + READ_SIZE
    assert largest <= get_spec().limit("retained-output")["maximum"]
