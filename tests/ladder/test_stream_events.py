"""The client's one reader of the server's stream events: every event kind, as the server builds it."""

from __future__ import annotations

import base64
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tts_server.protocol import (
    chunk_event,
    done_event,
    encode_line,
    error_event,
    phoneme_timestamps_event,
    word_timestamps_event,
)

from tts_bench.measure.playback import PlaybackTracker
from tts_bench.measure.transport.stream_events import (
    Outcome,
    StreamReading,
    base64_audio_seconds,
    base64_size,
    parse_event,
    refusal_outcome,
)
from tts_bench.telemetry import QUEUE_SATURATED_ERROR

CONTEXT = "ctx-1"
AUDIO = base64.b64encode(b"\x01\x00" * 480).decode()  # 20 ms of 24 kHz pcm_s16le


def ticking_clock(step_s: float = 0.1):
    """A clock that moves `step_s` on every read, from 0."""
    counter = itertools.count()
    return lambda: next(counter) * step_s


# (event as the server sends it, ends the stream, outcome, detail)
EVENTS = [
    (chunk_event(CONTEXT, AUDIO, 24000, 0.02), False, None, ""),
    (word_timestamps_event(CONTEXT, ["hi"], [0.0], [0.2]), False, None, ""),
    (phoneme_timestamps_event(CONTEXT, ["h", "i"], [0.0, 0.1], [0.1, 0.2]), False, None, ""),
    (done_event(CONTEXT, 12.5), True, Outcome.OK, ""),
    (error_event(CONTEXT, 500, "synthesis_failed"), True, Outcome.ERROR, "500: synthesis_failed"),
    (
        error_event(CONTEXT, 503, QUEUE_SATURATED_ERROR, retry_after_ms=100),
        True,
        Outcome.REJECTED,
        f"503: {QUEUE_SATURATED_ERROR}",
    ),
    ({"type": "cancelled", "context_id": CONTEXT, "done": True}, True, Outcome.CANCELLED, ""),
    ({"type": "something_new", "context_id": CONTEXT}, False, None, ""),
]


@pytest.mark.parametrize(("event", "ends", "outcome", "detail"), EVENTS)
def test_every_event_kind_is_read_one_way(event, ends, outcome, detail):
    reading = StreamReading(CONTEXT, ticking_clock())
    assert reading.feed(encode_line(event)) is ends
    assert reading.outcome is outcome
    assert reading.detail == detail


def test_a_stream_is_timed_at_its_first_audio_and_ends_at_done():
    heard = PlaybackTracker()
    reading = StreamReading(CONTEXT, ticking_clock(), heard=heard)  # started at 0.0
    lines = [
        encode_line(word_timestamps_event(CONTEXT, ["hi"], [0.0], [0.2])),  # no audio: no TTFAB
        encode_line(chunk_event(CONTEXT, AUDIO, 24000, 0.02)),
        encode_line(chunk_event(CONTEXT, AUDIO, 24000, 0.02)),
        encode_line(done_event(CONTEXT, 12.5)),
    ]
    assert [reading.feed(line) for line in lines] == [False, False, False, True]
    assert reading.ttfab_ms == pytest.approx(100.0)  # the first chunk, read at the clock's 0.1
    assert reading.outcome is Outcome.OK and reading.server_first_chunk_ms == 12.5
    assert reading.audio_bytes == 2 * 960
    assert heard.result().audio_s == pytest.approx(0.04)
    # After the end, further lines change nothing (a stream is read to its end to pool it).
    assert reading.feed(encode_line(error_event(CONTEXT, 500, "late")))
    assert reading.outcome is Outcome.OK


def test_events_of_another_context_are_skipped():
    reading = StreamReading(CONTEXT, ticking_clock())
    assert not reading.feed(encode_line(done_event("someone-else")))
    assert reading.outcome is None and parse_event(encode_line(done_event("x")), CONTEXT) is None
    assert reading.feed(encode_line(done_event(CONTEXT)))  # an event without one is ours


def test_a_stream_cut_before_its_end_is_an_error():
    reading = StreamReading(CONTEXT, ticking_clock())
    reading.feed(encode_line(chunk_event(CONTEXT, AUDIO, 24000, 0.02)))
    assert reading.end() is Outcome.ERROR and "without a done event" in reading.detail


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (503, '{"error":"queue_saturated","retry_after_ms":100}', Outcome.REJECTED),
        (503, '{"error":"shutting_down"}', Outcome.ERROR),
        (500, '{"error":"queue_saturated"}', Outcome.ERROR),
        (422, '{"error":"invalid_request"}', Outcome.ERROR),
        (None, "queue_saturated", Outcome.ERROR),
    ],
)
def test_a_refusal_before_the_stream_is_rejected_only_when_the_gate_says_so(status, body, outcome):
    assert refusal_outcome(status, body) is outcome
    if status is not None:
        reading = StreamReading(CONTEXT)
        reading.refused(status, body)
        assert reading.outcome is outcome and reading.detail.startswith(f"HTTP {status}: ")


def test_a_line_that_is_not_an_event_is_refused():
    with pytest.raises(ValueError):
        parse_event(b"[1, 2]")
    with pytest.raises(ValueError):
        parse_event(b"not json")


@given(st.binary(max_size=3000))
def test_base64_sizes_are_read_from_the_length_alone(raw):
    encoded = base64.b64encode(raw).decode("ascii")
    assert base64_size(encoded) == len(raw)
    if len(raw) % 2 == 0:
        assert base64_audio_seconds(encoded, 24000) == pytest.approx(len(raw) / 48000)
