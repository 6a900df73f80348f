"""`application/vnd.amazon.eventstream`: the frames both SageMaker streams send and receive.

A message is a 12-byte prelude (total length, headers length, CRC32 of those 8 bytes), typed
headers, a payload, and a CRC32 of everything before it. `Message` encodes one and
`MessageDecoder` reads them back as bytes arrive; `payload_part`, `stream_exception` and
`model_stream_error` are SageMaker's events on the response stream and the bidirectional one.
Pure: bytes in, bytes out, no I/O.
"""

from __future__ import annotations

import datetime
import json
import struct
import uuid
from binascii import crc32
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from tts_bench.errors import TtsBenchError

PRELUDE_BYTES = 12
CRC_BYTES = 4
MAX_HEADERS_BYTES = 128 * 1024  # the format's limits, as the SDK enforces them
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024

HeaderValue = bool | int | str | bytes | datetime.datetime | uuid.UUID

# Header value type tags.
_TRUE, _FALSE, _BYTE, _SHORT, _INT, _LONG, _BYTES, _STRING, _TIMESTAMP, _UUID = range(10)
_FIXED = {_BYTE: ">b", _SHORT: ">h", _INT: ">i", _LONG: ">q"}


class FrameError(TtsBenchError):
    """Bytes that are not a well-formed event-stream message (bad length, CRC or header)."""


@dataclass(frozen=True)
class Message:
    """One event-stream message: its headers in order, and its payload."""

    headers: Mapping[str, HeaderValue] = field(default_factory=dict)
    payload: bytes = b""

    def encode(self) -> bytes:
        headers = b"".join(_encode_header(name, value) for name, value in self.headers.items())
        if len(headers) > MAX_HEADERS_BYTES or len(self.payload) > MAX_PAYLOAD_BYTES:
            raise FrameError("message too large for the event-stream format")
        total = PRELUDE_BYTES + len(headers) + len(self.payload) + CRC_BYTES
        prelude = struct.pack(">II", total, len(headers))
        prelude += struct.pack(">I", crc32(prelude))
        body = prelude + headers + self.payload
        return body + struct.pack(">I", crc32(body))


def _encode_header(name: str, value: HeaderValue) -> bytes:
    raw_name = name.encode()
    if not 0 < len(raw_name) < 256:
        raise FrameError(f"header name {name!r}: 1 to 255 bytes")
    head = struct.pack(">B", len(raw_name)) + raw_name
    if isinstance(value, bool):  # before int: bool is an int
        return head + struct.pack(">B", _TRUE if value else _FALSE)
    if isinstance(value, int):
        tag = _INT if -(2**31) <= value < 2**31 else _LONG
        return head + struct.pack(">B", tag) + struct.pack(_FIXED[tag], value)
    if isinstance(value, datetime.datetime):
        millis = round(value.timestamp() * 1000)
        return head + struct.pack(">Bq", _TIMESTAMP, millis)
    if isinstance(value, uuid.UUID):
        return head + struct.pack(">B", _UUID) + value.bytes
    tag, raw = (_STRING, value.encode()) if isinstance(value, str) else (_BYTES, value)
    if len(raw) > 0x7FFF:
        raise FrameError(f"header {name!r}: value longer than 32 KiB")
    return head + struct.pack(">BH", tag, len(raw)) + raw


def _decode_headers(raw: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    at = 0
    try:
        while at < len(raw):
            size = raw[at]
            name = raw[at + 1 : at + 1 + size].decode()
            at += 1 + size
            tag = raw[at]
            at += 1
            value: HeaderValue
            if tag in (_TRUE, _FALSE):
                value = tag == _TRUE
            elif tag in _FIXED:
                fmt = _FIXED[tag]
                (value,) = struct.unpack_from(fmt, raw, at)
                at += struct.calcsize(fmt)
            elif tag in (_BYTES, _STRING):
                (length,) = struct.unpack_from(">H", raw, at)
                chunk = raw[at + 2 : at + 2 + length]
                if len(chunk) != length:
                    raise FrameError(f"header {name!r}: value runs past the headers")
                value = chunk.decode() if tag == _STRING else bytes(chunk)
                at += 2 + length
            elif tag == _TIMESTAMP:
                (millis,) = struct.unpack_from(">q", raw, at)
                value = datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC)
                at += 8
            elif tag == _UUID:
                if at + 16 > len(raw):
                    raise FrameError(f"header {name!r}: uuid runs past the headers")
                value = uuid.UUID(bytes=bytes(raw[at : at + 16]))
                at += 16
            else:
                raise FrameError(f"header {name!r}: unknown value type {tag}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"malformed headers: {exc}") from None
    return headers


class MessageDecoder:
    """Incremental decoder: feed bytes as they arrive, get whole messages back."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> Iterator[Message]:
        self._buffer += data
        while len(self._buffer) >= PRELUDE_BYTES:
            total, headers_len, prelude_crc = struct.unpack_from(">III", self._buffer)
            if crc32(self._buffer[:8]) != prelude_crc:
                raise FrameError("prelude CRC mismatch")
            payload_len = total - PRELUDE_BYTES - headers_len - CRC_BYTES
            if headers_len > MAX_HEADERS_BYTES or not 0 <= payload_len <= MAX_PAYLOAD_BYTES:
                raise FrameError(f"impossible lengths: total {total}, headers {headers_len}")
            if len(self._buffer) < total:
                return
            frame = bytes(self._buffer[:total])
            del self._buffer[:total]
            (message_crc,) = struct.unpack_from(">I", frame, total - CRC_BYTES)
            if crc32(frame[: total - CRC_BYTES]) != message_crc:
                raise FrameError("message CRC mismatch")
            headers = _decode_headers(frame[PRELUDE_BYTES : PRELUDE_BYTES + headers_len])
            yield Message(headers, frame[PRELUDE_BYTES + headers_len : total - CRC_BYTES])

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message still buffered."""
        return len(self._buffer)


# --------------------------------------------------------------------------- SageMaker's events


def payload_part(payload: bytes, data_type: str | None = None) -> Message:
    """A `PayloadPart` event: a piece of the container's response. The bidirectional stream
    says whether it is text (`DataType` UTF8) or binary; the response stream does not."""
    headers: dict[str, HeaderValue] = {
        ":message-type": "event",
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
    }
    if data_type is not None:
        headers["DataType"] = data_type
    return Message(headers, payload)


def stream_exception(kind: str, message: str, error_code: str | None = None) -> Message:
    """A modeled exception event (`ModelStreamError`, `InternalStreamFailure`): the SDK raises it."""
    body: dict[str, str] = {"Message": message}
    if error_code is not None:
        body["ErrorCode"] = error_code
    return Message(
        {
            ":message-type": "exception",
            ":exception-type": kind,
            ":content-type": "application/json",
        },
        json.dumps(body).encode(),
    )


def model_stream_error(error_code: str, message: str) -> bytes:
    """The response stream's `ModelStreamError`, encoded. botocore keeps only `Message` (it
    drops `ErrorCode`), so the message starts with the code for the client to tell them apart."""
    return stream_exception("ModelStreamError", f"{error_code}: {message}", error_code).encode()


def split_unaligned(chunk: bytes) -> list[bytes]:
    """The parts one flushed chunk is sent as: cut in the middle, so frames do not line up
    with the container's NDJSON lines (SageMaker's do not either) and clients must re-join."""
    if len(chunk) < 2:
        return [chunk] if chunk else []
    middle = len(chunk) // 2
    return [chunk[:middle], chunk[middle:]]
