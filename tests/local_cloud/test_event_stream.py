"""Frames as botocore's own event-stream parser reads them (pure, no server)."""

from __future__ import annotations

import json

from botocore.eventstream import EventStreamBuffer
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.local_cloud.data_plane.event_stream import (
    model_stream_error,
    payload_part,
    split_unaligned,
)


def _decode(data: bytes) -> list:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return list(buffer)


@given(st.binary(max_size=5000))
def test_payload_part_round_trips_through_botocore(data: bytes) -> None:
    (message,) = _decode(payload_part(data).encode())
    assert message.headers[":event-type"] == "PayloadPart"
    assert message.headers[":message-type"] == "event"
    assert message.payload == data


@given(st.lists(st.binary(min_size=1, max_size=300), max_size=20))
def test_split_parts_rejoin_to_the_chunks(chunks: list[bytes]) -> None:
    parts = [part for chunk in chunks for part in split_unaligned(chunk)]
    assert b"".join(parts) == b"".join(chunks)
    assert all(parts)


def test_a_line_is_never_one_frame() -> None:
    line = json.dumps({"type": "chunk", "data": "AAAA"}).encode() + b"\n"
    assert all(not part.endswith(b"\n") for part in split_unaligned(line)[:-1])
    assert len(split_unaligned(line)) == 2


def test_model_stream_error_names_its_code_in_the_message() -> None:
    (message,) = _decode(model_stream_error("StreamBroken", "cut"))
    assert message.headers[":message-type"] == "exception"
    assert message.headers[":exception-type"] == "ModelStreamError"
    body = json.loads(message.payload)
    assert body == {"ErrorCode": "StreamBroken", "Message": "StreamBroken: cut"}


def test_frames_concatenated_decode_in_order() -> None:
    data = b"".join(payload_part(bytes([i])).encode() for i in range(10))
    assert [m.payload for m in _decode(data)] == [bytes([i]) for i in range(10)]
