"""Events framed off the event loop: the fast paths write exactly what the JSON encoder would.

The server builds a segment's chunk events from one template per segment and base64-encodes
the segment in one call where it can (`protocol.chunk_event_texts`,
`audio_format.base64_chunks`); these hold both to the plain definitions (one `chunk_event`
dict per chunk through `event_text`, one base64 call per chunk), byte for byte.
"""

from __future__ import annotations

import base64

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tts_server.audio_format import BYTES_PER_SAMPLE, base64_chunks, encoded_chunks
from tts_server.engine.base import PhonemeTiming, Segment, WordTiming
from tts_server.generation import _segment_events, _timestamp_events
from tts_server.protocol import (
    SAMPLE_RATES,
    TtsRequest,
    chunk_event,
    chunk_event_texts,
    event_text,
)

from tests.server.server_client import speech_request

B64_TEXT = st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode("ascii"))


@settings(max_examples=200, deadline=None)
@given(
    context_id=st.text(max_size=30),  # any text: quotes, escapes, lone surrogates
    rate=st.sampled_from(SAMPLE_RATES),
    step_time=st.floats(min_value=0, max_value=1e4, allow_nan=False) | st.just(0.0),
    chunks=st.lists(B64_TEXT, max_size=6),
)
def test_chunk_texts_from_a_template_are_the_encoders_own(context_id, rate, step_time, chunks):
    expected = [
        event_text(chunk_event(context_id, data, rate, step_time if i == 0 else 0.0))
        for i, data in enumerate(chunks)
    ]
    assert chunk_event_texts(context_id, chunks, rate, step_time) == expected


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), step=st.integers(min_value=1, max_value=40))
def test_base64_of_the_whole_cut_in_pieces_is_the_base64_of_each_piece(data, step):
    pieces = [data[i : i + step] for i in range(0, len(data), step)]
    assert base64_chunks(data, step) == [base64.b64encode(p).decode("ascii") for p in pieces]


def _dict_path(segment: Segment, request: TtsRequest, step_time: float) -> list[str]:
    """One segment's events built the plain way: a dict per event, each encoded on its own."""
    fmt = request.output_format
    chunks = encoded_chunks(segment.audio, 24_000, fmt.sample_rate, fmt.encoding)
    events = [
        chunk_event(
            request.context_id,
            base64.b64encode(c).decode("ascii"),
            fmt.sample_rate,
            step_time if i == 0 else 0.0,
        )
        for i, c in enumerate(chunks)
    ]
    if not request.use_normalized_timestamps:
        events.extend(_timestamp_events(request, [segment], None))
    return [event_text(e) for e in events]


@settings(max_examples=30, deadline=None)
@given(
    encoding=st.sampled_from(sorted(BYTES_PER_SAMPLE)),
    rate=st.sampled_from(SAMPLE_RATES),
    samples=st.integers(min_value=0, max_value=3000),
    step_time=st.floats(min_value=0, max_value=10, allow_nan=False),
    stamps=st.booleans(),
    normalized=st.booleans(),
)
def test_a_segments_event_texts_match_the_dict_path(
    encoding, rate, samples, step_time, stamps, normalized
):
    audio = np.random.default_rng(samples).uniform(-1.2, 1.2, samples).astype(np.float32)
    segment = Segment(
        0,
        "Hi there.",
        "hˈI ðɛɹ",
        audio,
        0.5,
        phoneme_timings=(PhonemeTiming("h", 0.5, 0.6), PhonemeTiming("ˈI", 0.6, 0.7)),
        word_timings=(WordTiming("Hi", 0.5, 0.7), WordTiming("there", 0.7, 1.0)),
    )
    body = speech_request("ctx-1")
    body["output_format"] = {"container": "raw", "encoding": encoding, "sample_rate": rate}
    body |= {
        "add_timestamps": stamps,
        "add_phoneme_timestamps": stamps,
        "use_normalized_timestamps": normalized,
    }
    request = TtsRequest.model_validate(body)
    texts = _segment_events(segment, request, step_time, 24_000)
    assert texts == _dict_path(segment, request, step_time)
