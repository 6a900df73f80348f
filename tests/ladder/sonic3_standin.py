"""A stand-in for Cartesia Sonic-3's SageMaker container, for tests only (issue 39).

Written from the contract its page publishes (the second seed), not from its code: it validates
the documented request fields (422 naming each bad one), streams raw PCM in chunks of at most
20 ms (base64 in `data`, with `sampling_rate` and `step_time`) at the requested rate, sends
`timestamps` / `phoneme_timestamps` events when asked, ends with a `done` event, and holds at
most `slots` generations (4, as published), answering the next with 429. The audio is a tone
made at a fixed real-time factor: it is not a TTS model.

Its `/ping` answers as this project's container does (readiness, no admission bound, a
fingerprint), with `instance_model` "stand-in", so a local ladder can fingerprint it and marks
what it measures `emulated`; Sonic-3's own `/ping` is SageMaker's health check only.

    with StandIn(StandInSettings(rtf=0.2)) as standin: ... standin.url ...

or as a container's command, on the port SageMaker names (`SAGEMAKER_BIND_TO_PORT`, else 8080),
as the local cloud starts it with `--container-cmd`:

    python tests/ladder/sonic3_standin.py [--port N] [--rtf 0.2] [--slots 4]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

LANGUAGES = frozenset(
    [
        "en",
        "fr",
        "de",
        "es",
        "pt",
        "zh",
        "ja",
        "hi",
        "it",
        "ko",
        "nl",
        "pl",
        "ru",
        "sv",
        "tr",
        "tl",
        "bg",
        "ro",
        "ar",
        "cs",
        "el",
        "fi",
        "hr",
        "ms",
        "sk",
        "da",
        "ta",
        "uk",
        "hu",
        "no",
        "vi",
        "bn",
        "th",
        "he",
        "ka",
        "id",
        "te",
        "gu",
        "kn",
        "ml",
        "mr",
        "pa",
    ]
)
ENCODINGS = {"pcm": 2, "pcm_s16le": 2, "pcm_f32le": 4}  # the page's sample says "pcm"
REQUIRED = ("context_id", "transcript", "language", "output_format")
OPTIONAL = ("generation_config", "add_timestamps", "add_phoneme_timestamps",
            "use_normalized_timestamps")  # fmt: skip
CHUNK_S = 0.02  # the page: at most 20 ms of audio per chunk event
TONE_HZ = 440.0
DIGEST = "sha256:" + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


@dataclass(frozen=True)
class StandInSettings:
    """`rtf`: seconds of generation per second of audio; `audio_s_per_char`: how long an
    utterance speaks; `slots`: generations held at once (Sonic-3 publishes 4)."""

    rtf: float = 0.2
    audio_s_per_char: float = 0.02
    slots: int = 4


ACTIVE = web.AppKey("active", list)  # [generations now streaming]
SETTINGS = web.AppKey("settings", StandInSettings)


def problems_of(body: Any) -> list[str]:
    """Every documented field that is missing or malformed (empty: a valid request)."""
    if not isinstance(body, dict):
        return ["body: a JSON object"]
    out = [f"{name}: required" for name in REQUIRED if name not in body]
    voice = body.get("voice_id", body.get("voice"))
    if voice is None:
        out.append("voice_id: required")
    elif not (
        isinstance(voice, dict) and voice.get("mode") == "id" and isinstance(voice.get("id"), str)
    ):
        out.append("voice_id: {mode: id, id: <string>}; only mode id")  # fmt: skip
    known = {*REQUIRED, *OPTIONAL, "voice_id", "voice"}
    out += [f"{name}: not a field" for name in sorted(set(body) - known)]
    for name in ("context_id", "transcript"):
        if name in body and not (isinstance(body[name], str) and body[name].strip()):
            out.append(f"{name}: a non-empty string")
    if "language" in body and body["language"] not in LANGUAGES:
        out.append(f"language: one of {', '.join(sorted(LANGUAGES))}")
    fmt = body.get("output_format")
    if "output_format" in body and not (
        isinstance(fmt, dict) and fmt.get("container") == "raw"
        and fmt.get("encoding") in ENCODINGS
        and type(fmt.get("sample_rate")) is int and 8000 <= fmt["sample_rate"] <= 48000
    ):  # fmt: skip
        out.append("output_format: {container: raw, encoding: pcm|pcm_s16le|pcm_f32le, "
                   "sample_rate: 8000..48000}")  # fmt: skip
    for name in OPTIONAL[1:]:
        if name in body and not isinstance(body[name], bool):
            out.append(f"{name}: true or false")
    if "generation_config" in body and not isinstance(body["generation_config"], dict):
        out.append("generation_config: an object")
    return out


def tone(first_sample: int, count: int, rate: int, encoding: str) -> bytes:
    """`count` samples of the tone from `first_sample` on, as the encoding's little-endian PCM."""
    import numpy as np

    t = (first_sample + np.arange(count)) / rate
    wave = 0.3 * np.sin(2 * math.pi * TONE_HZ * t)
    if ENCODINGS[encoding] == 4:
        return wave.astype("<f4").tobytes()
    return (wave * 32767).astype("<i2").tobytes()


def event(kind: str, context_id: str, **fields: Any) -> bytes:
    import json

    return (json.dumps({"type": kind, "context_id": context_id, **fields}) + "\n").encode()


async def invocations(request: web.Request) -> web.StreamResponse:
    try:
        body = await request.json()
    except ValueError:
        return web.json_response({"message": "body: not JSON"}, status=422)
    if problems := problems_of(body):
        return web.json_response({"message": "; ".join(problems)}, status=422)
    settings, active = request.app[SETTINGS], request.app[ACTIVE]
    if len(active) >= settings.slots:  # no queue: the page's 429, at once
        return web.json_response(
            {"message": f"no capacity: {settings.slots} generations in progress"}, status=429
        )
    active.append(body["context_id"])
    try:
        return await stream(request, body, settings)
    except ConnectionResetError:  # the client went away (a rung's end cancels its requests)
        return web.Response(status=499)
    finally:
        active.remove(body["context_id"])


async def stream(request: web.Request, body: dict, settings: StandInSettings) -> web.StreamResponse:
    context_id, fmt = body["context_id"], body["output_format"]
    rate, encoding = fmt["sample_rate"], fmt["encoding"]
    words = body["transcript"].split()
    response = web.StreamResponse(headers={"Content-Type": "application/jsonlines"})
    await response.prepare(request)
    per_chunk = int(rate * CHUNK_S)
    total = max(per_chunk, int(rate * settings.audio_s_per_char * len(body["transcript"])))
    sent = 0
    while sent < total:
        count = min(per_chunk, total - sent)
        step_s = count / rate * settings.rtf
        await asyncio.sleep(step_s)  # the generation of this chunk, at the fixed RTF
        data = base64.b64encode(tone(sent, count, rate, encoding)).decode()
        await response.write(event(
            "chunk", context_id, status_code=206, done=False, data=data,
            sampling_rate=rate, step_time=step_s,
        ))  # fmt: skip
        sent += count
    duration = total / rate
    scale = 1 / duration if body.get("use_normalized_timestamps") else 1.0
    bounds = [(i * duration / len(words) * scale, (i + 1) * duration / len(words) * scale)
              for i in range(len(words))]  # fmt: skip
    if body.get("add_timestamps"):
        await response.write(event(
            "timestamps", context_id, status_code=206, done=True,
            word_timestamps={"words": words, "start": [b[0] for b in bounds],
                             "end": [b[1] for b in bounds]},
        ))  # fmt: skip
    if body.get("add_phoneme_timestamps"):
        await response.write(event(
            "phoneme_timestamps", context_id, status_code=206, done=True,
            phoneme_timestamps={"phonemes": [w[:1] for w in words],
                                "start": [b[0] for b in bounds], "end": [b[1] for b in bounds]},
        ))  # fmt: skip
    await response.write(event("done", context_id, status_code=200, done=True))
    await response.write_eof()
    return response


async def ping(request: web.Request) -> web.Response:
    return web.json_response({
        "status": "ready", "ready": True, "queue_max_depth": None,
        "in_flight": len(request.app[ACTIVE]), "instance_model": "stand-in",
        "fingerprint": {"model": "sonic-3", "instance_type": "local-stand-in",
                        "image_digest": DIGEST, "performance_env": {}},
    })  # fmt: skip


def create_app(settings: StandInSettings) -> web.Application:
    app = web.Application()
    app[SETTINGS], app[ACTIVE] = settings, []
    app.router.add_get("/ping", ping)
    app.router.add_post("/invocations", invocations)
    app.router.add_post("/invocations-response-stream", invocations)
    return app


class StandIn:
    """The stand-in on loopback, on a port the OS picks, served from a thread of its own."""

    def __init__(self, settings: StandInSettings | None = None) -> None:
        self.settings = settings or StandInSettings()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> StandIn:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        self.runner = web.AppRunner(create_app(self.settings), handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    def __exit__(self, *_exc: object) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM (aiohttp's shutdown lets the generations in flight finish)."""
    parser = argparse.ArgumentParser(description="The Sonic-3 stand-in (tests only).")
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("SAGEMAKER_BIND_TO_PORT", 8080))
    )
    parser.add_argument("--rtf", type=float, default=StandInSettings.rtf)
    parser.add_argument("--slots", type=int, default=StandInSettings.slots)
    args = parser.parse_args(argv)
    settings = StandInSettings(rtf=args.rtf, slots=args.slots)
    print(f"sonic-3 stand-in on 127.0.0.1:{args.port} ({settings})", flush=True)
    web.run_app(create_app(settings), host="127.0.0.1", port=args.port, print=None,
                access_log=None, shutdown_timeout=25)  # fmt: skip


if __name__ == "__main__":
    main()
