"""The client side of the wire protocol, for the server tests: requests, event streams, audio."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np

ENGLISH = "Hello there. How are you today?"


def speech_request(context_id: str, transcript: str = ENGLISH, **overrides: Any) -> dict[str, Any]:
    """A valid request; `overrides` replace top-level fields (output_format merges)."""
    body: dict[str, Any] = {
        "context_id": context_id,
        "transcript": transcript,
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }
    fmt = overrides.pop("output_format", None)
    if fmt:
        body["output_format"] = {**body["output_format"], **fmt}
    body.update(overrides)
    return body


BYTES_PER_SAMPLE = {"pcm_s16le": 2, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}


def decode_audio(chunks: list[dict[str, Any]], encoding: str) -> np.ndarray:
    """The concatenated chunk payloads as float samples in [-1, 1]."""
    data = b"".join(base64.b64decode(c["data"]) for c in chunks)
    if encoding == "pcm_s16le":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768
    if encoding == "pcm_f32le":
        return np.frombuffer(data, "<f4")
    return np.frombuffer(data, np.uint8).astype(np.float32)  # companded: length only


# Many short sentences: each segment is quick to make (a first chunk comes early), while the
# whole text takes far longer than any drain deadline or ceiling in the tests.
LONG_TEXT = " ".join(f"This is sentence {i}." for i in range(1, 60))


@dataclass
class StreamResult:
    """One POST /invocations: status, events (or the error body), and when it finished."""

    status: int
    events: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None
    finished_at: float = 0.0  # time.monotonic()

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]


async def post_stream(
    session: aiohttp.ClientSession,
    base: str,
    body: Any,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> StreamResult:
    """POST a request and read the whole response: JSON lines when 200, a JSON body otherwise."""
    data = raw if raw is not None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    async with session.post(f"{base}/invocations", data=data, headers=hdrs) as resp:
        if resp.status != 200:
            text = await resp.text()
            return StreamResult(resp.status, body=json.loads(text), finished_at=time.monotonic())
        events = []
        async for line in resp.content:
            if line.strip():
                events.append(json.loads(line))
        return StreamResult(200, events, finished_at=time.monotonic())
