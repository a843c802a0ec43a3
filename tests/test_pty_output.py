"""The output ring and the frames of one session (`bundle_server/sessions/pty/_output.py`), unit
level: what the stream tests check end to end, here over every chunking hypothesis finds."""

from __future__ import annotations

import base64
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bundle_contract._spec import get_spec
from bundle_server._streams.sequenced import SubscriberLagged
from bundle_server.sessions.pty._output import Chunk, Frame, OutputLog, OutputSubscription
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


def paced(subscribers: int) -> tuple[OutputLog, list[OutputSubscription]]:
    """A log with a 100-byte high water, 400-byte queues and a 2 s stall, and subscribers."""
    ring = OutputLog(
        1024, queue_capacity=1024, lock=threading.Lock(), queue_bytes=400, high_water=100, stall=2
    )
    return ring, [ring.subscribe({}, None) for _ in range(subscribers)]


def test_with_no_reader_or_one_reader_not_behind_the_pty_is_read_on() -> None:
    ring, _ = paced(0)
    ring.append(Frame.output(b"x" * 1000))
    assert ring.hold(time.monotonic()) is None
    ring, (_behind, keeping_up) = paced(2)
    ring.append(Frame.output(b"x" * 150))
    keeping_up.take()
    assert ring.hold(time.monotonic()) is None
    assert not ring.paused


def test_when_every_reader_is_behind_the_pty_is_held_until_one_takes() -> None:
    ring, (one, other) = paced(2)
    resumed: list[bool] = []
    ring.resume = lambda: resumed.append(True)
    ring.append(Frame.output(b"x" * 150))
    assert ring.hold(time.monotonic()) == 2  # ask again at the latest after a stall's time
    assert ring.paused and not resumed
    assert [f.data for f in other.take()] == [b"x" * 150]
    assert resumed == [True] and not ring.paused
    assert ring.hold(time.monotonic()) is None
    assert not one.lagged and not other.lagged  # nobody is cut for being slow


def test_a_full_reader_that_still_makes_progress_holds_the_pty_and_is_not_cut() -> None:
    ring, (slow, fast) = paced(2)
    ring.append(Frame.output(b"x" * 400))
    fast.take()
    slow.progressed()  # it wrote a piece of its last batch just now
    wait = ring.hold(slow.progress_at + 1.5)
    assert wait == pytest.approx(0.5)
    assert not slow.lagged


def test_a_full_reader_without_progress_for_the_stall_time_is_cut_and_the_pty_read_on() -> None:
    ring, (stalled, fast) = paced(2)
    ring.append(Frame.output(b"x" * 400))
    fast.take()
    assert ring.hold(stalled.progress_at + 2.01) is None
    with pytest.raises(SubscriberLagged):
        stalled.take()
    ring.append(Frame.output(b"more"))
    assert [f.data for f in fast.take()] == [b"more"]


def test_a_lone_stalled_reader_holds_the_pty_but_is_never_cut_for_it() -> None:
    # Nobody else reads: a terminal nobody reads simply stops the program.
    ring, (alone,) = paced(1)
    ring.append(Frame.output(b"x" * 150))
    assert ring.hold(time.monotonic() + 60) is not None
    assert not alone.lagged


def test_a_queue_never_grows_past_twice_its_bound_even_if_appended_regardless() -> None:
    ring, (stalled,) = paced(1)
    for _ in range(10):
        ring.append(Frame.output(b"x" * 100))  # the reader would have held off long before
    with pytest.raises(SubscriberLagged):
        stalled.take()


def test_a_lone_reader_full_of_small_frames_is_held_for_but_never_cut() -> None:
    # Full by its frame count while far below the high water in bytes: still alone, still
    # only holding the session back.
    ring = OutputLog(
        1024, queue_capacity=4, lock=threading.Lock(), queue_bytes=400, high_water=100, stall=2
    )
    alone = ring.subscribe({}, None)
    for _ in range(4):
        ring.append(Frame.output(b"x"))
    assert ring.hold(alone.progress_at + 60) == 2
    assert not alone.lagged


def test_a_new_reader_releases_a_session_its_readers_held_back() -> None:
    ring, (behind,) = paced(1)
    resumed: list[bool] = []
    ring.resume = lambda: resumed.append(True)
    ring.append(Frame.output(b"x" * 150))
    assert ring.hold(time.monotonic()) is not None
    ring.subscribe({}, None)
    assert resumed == [True]
    assert ring.hold(time.monotonic()) is None  # the newcomer is not behind
    assert not behind.lagged
