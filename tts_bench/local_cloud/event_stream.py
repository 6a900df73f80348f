"""`application/vnd.amazon.eventstream` frames, as SageMaker's response stream sends them.

A message is a prelude (total length, headers length, CRC32 of those 8 bytes), string headers
(`:event-type`, `:message-type`, `:content-type` or `:exception-type`), the payload, and a CRC32
of everything before it. Pure functions: bytes in, bytes out.
"""

from __future__ import annotations

import binascii
import json
import struct

_STRING = 7  # the header value type for UTF-8 strings


def _headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack("!B", len(raw_name)) + raw_name
        out += struct.pack("!BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    head = _headers(headers)
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack("!I", binascii.crc32(body))


def payload_part(data: bytes) -> bytes:
    """One `PayloadPart` event carrying `data` (a piece of the container's response)."""
    return encode_message(
        {
            ":event-type": "PayloadPart",
            ":content-type": "application/octet-stream",
            ":message-type": "event",
        },
        data,
    )


def model_stream_error(error_code: str, message: str) -> bytes:
    """A `ModelStreamError` exception event. botocore keeps only `Message` (it drops
    `ErrorCode`), so the message starts with the code for the client to tell them apart."""
    body = json.dumps({"ErrorCode": error_code, "Message": f"{error_code}: {message}"})
    return encode_message(
        {
            ":exception-type": "ModelStreamError",
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        body.encode(),
    )


def split_unaligned(chunk: bytes) -> list[bytes]:
    """The parts one flushed chunk is sent as: cut in the middle, so frames do not line up
    with the container's NDJSON lines (SageMaker's do not either) and clients must re-join."""
    if len(chunk) < 2:
        return [chunk] if chunk else []
    middle = len(chunk) // 2
    return [chunk[:middle], chunk[middle:]]
