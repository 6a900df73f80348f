"""The event-stream codec the HTTP/2 bridge speaks: round trips, splits, corruption, envelopes."""

from __future__ import annotations

import datetime
import json
from binascii import crc32

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.local_cloud.data_plane.bidi_frames import unwrap_signed
from tts_bench.local_cloud.data_plane.event_stream import (
    FrameError,
    Message,
    MessageDecoder,
    payload_part,
    stream_exception,
)

header_values = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=40),
    st.binary(max_size=40),
    st.uuids(),
    st.datetimes(
        min_value=datetime.datetime(1971, 1, 1), max_value=datetime.datetime(2200, 1, 1)
    ).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=datetime.UTC)),
)
messages = st.builds(
    Message,
    st.dictionaries(st.text(min_size=1, max_size=20), header_values, max_size=6),
    st.binary(max_size=300),
)


@given(st.lists(messages, min_size=1, max_size=4), st.lists(st.integers(1, 64), max_size=20))
def test_messages_come_back_whole_however_the_bytes_are_split(
    sent: list[Message], cuts: list[int]
) -> None:
    wire = b"".join(m.encode() for m in sent)
    decoder, received, at = MessageDecoder(), [], 0
    for size in [*cuts, len(wire)]:
        received += list(decoder.feed(wire[at : at + size]))
        at += size
    assert received == sent
    assert decoder.pending == 0


@given(messages, st.data())
def test_a_flipped_bit_is_refused(message: Message, data: st.DataObject) -> None:
    wire = bytearray(message.encode())
    at = data.draw(st.integers(0, len(wire) - 1))
    wire[at] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(FrameError):
        list(MessageDecoder().feed(bytes(wire)))


def test_a_known_message_encodes_as_the_format_says() -> None:
    # Prelude (total 50, headers 32, its CRC), one string header (name length, name, type 7,
    # value length, value), the payload, the CRC of all that.
    wire = Message({"content-type": "application/json"}, b"{}").encode()
    assert wire[:8] == bytes.fromhex("0000003200000020")
    assert wire[8:12] == crc32(wire[:8]).to_bytes(4, "big")
    assert wire[12:44] == b"\x0ccontent-type\x07\x00\x10application/json"
    assert wire[44:46] == b"{}"
    assert wire[46:] == crc32(wire[:46]).to_bytes(4, "big")


def signed(inner: Message | None) -> Message:
    return Message(
        {":date": datetime.datetime.now(datetime.UTC), ":chunk-signature": b"\x01" * 32},
        inner.encode() if inner is not None else b"",
    )


def test_envelopes_unwrap_to_their_event_and_the_empty_one_ends_the_input() -> None:
    event = Message({":message-type": "event", ":event-type": "PayloadPart"}, b'{"a":1}')
    assert unwrap_signed(signed(event)) == event
    assert unwrap_signed(signed(None)) is None


def test_an_unsigned_event_is_refused() -> None:
    with pytest.raises(FrameError, match="unsigned"):
        unwrap_signed(Message({":date": datetime.datetime.now(datetime.UTC)}, b"x"))


def test_response_events_carry_the_sdk_shapes() -> None:
    part = payload_part(b'{"type":"chunk"}', "UTF8")
    assert part.headers[":event-type"] == "PayloadPart"
    assert part.headers["DataType"] == "UTF8"
    error = stream_exception("ModelStreamError", "gone", "StreamBroken")
    assert error.headers[":message-type"] == "exception"
    assert error.headers[":exception-type"] == "ModelStreamError"
    assert json.loads(error.payload) == {"Message": "gone", "ErrorCode": "StreamBroken"}
