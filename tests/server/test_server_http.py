"""POST /invocations against a real server with the real offline weights, over real sockets."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from typing import Any

import aiohttp
import numpy as np
import pytest

from tests.server.server_client import (
    BYTES_PER_SAMPLE,
    ENGLISH,
    StreamResult,
    decode_audio,
    post_stream,
    speech_request,
)
from tts_bench.telemetry import DIMENSIONS, METRIC_UNITS, NAMESPACE

pytestmark = pytest.mark.slow


async def _post(server: Any, body: Any, **kwargs: Any) -> StreamResult:
    async with aiohttp.ClientSession() as session:
        return await post_stream(session, server.base, body, **kwargs)


def post(server: Any, body: Any, **kwargs: Any) -> StreamResult:
    return asyncio.run(_post(server, body, **kwargs))


@pytest.mark.parametrize(("encoding", "rate"), [("pcm_s16le", 16000), ("pcm_mulaw", 8000)])
def test_valid_request_streams_chunks_of_at_most_20_ms_then_done(server, encoding, rate):
    result = post(
        server,
        speech_request(
            "valid-1", "Hello there.", output_format={"encoding": encoding, "sample_rate": rate}
        ),
    )

    assert result.status == 200
    chunks = result.of_type("chunk")
    assert chunks and result.events[:-1] == chunks  # no timestamps unless asked
    # The server's own FirstChunkLatency rides on the done event (the batching alarm).
    assert result.events[-1].pop("first_chunk_latency_ms") >= 0
    assert result.events[-1] == {
        "type": "done",
        "context_id": "valid-1",
        "done": True,
        "status_code": 200,
    }
    width = BYTES_PER_SAMPLE[encoding]
    for chunk in chunks:
        assert (chunk["context_id"], chunk["status_code"], chunk["done"]) == ("valid-1", 206, False)
        assert chunk["sampling_rate"] == rate
        size = len(base64.b64decode(chunk["data"]))
        assert size % width == 0 and 0 < size // width <= rate * 0.020
    assert sum(c["step_time"] for c in chunks) > 0


def test_english_with_a_japanese_voice_gives_audio_whose_length_fits_the_text(server):
    text = "The quick brown fox jumps over the lazy dog."
    result = post(server, speech_request("fox", text))

    audio = decode_audio(result.of_type("chunk"), "pcm_s16le")
    seconds = audio.size / 24000
    words = len(text.split())
    # Speech runs at about 2-4 words a second; a little silence at each end.
    assert words / 5 < seconds < words / 1.5 + 1.0
    rms = float(np.sqrt(np.mean(audio**2)))
    assert rms > 0.01  # not silence
    assert np.mean(np.abs(audio) > 0.99) < 0.001  # not clipping


def _timestamps(events: list[dict[str, Any]], kind: str, key: str) -> tuple[list, list, list]:
    names, starts, ends = [], [], []
    for event in events:
        if event["type"] == kind:
            table = event[key]
            label = "words" if key == "word_timestamps" else "phonemes"
            names += table[label]
            starts += table["start"]
            ends += table["end"]
    return names, starts, ends


@pytest.mark.parametrize("normalized", [False, True])
def test_word_and_phoneme_timestamps_are_monotonic_and_inside_the_audio(server, normalized):
    result = post(
        server,
        speech_request(
            "ts",
            ENGLISH,
            add_timestamps=True,
            add_phoneme_timestamps=True,
            use_normalized_timestamps=normalized,
        ),
    )

    assert result.events[-1]["type"] == "done"
    duration = decode_audio(result.of_type("chunk"), "pcm_s16le").size / 24000
    limit = 1.0 if normalized else duration + 1e-3
    words, w_start, w_end = _timestamps(result.events, "timestamps", "word_timestamps")
    phonemes, p_start, p_end = _timestamps(
        result.events, "phoneme_timestamps", "phoneme_timestamps"
    )
    assert [w.lower() for w in words] == re.findall(r"[a-z]+", ENGLISH.lower())
    assert len(phonemes) >= len(words)
    for starts, ends in ((w_start, w_end), (p_start, p_end)):
        assert starts == sorted(starts)
        assert all(0 <= s <= e <= limit for s, e in zip(starts, ends, strict=True))
    if normalized:
        assert max(w_end) > 0.5  # spread over the utterance, not squeezed at the start
    else:
        assert max(w_end) > duration / 2


def test_resampling_to_8000_and_48000_gives_audio_of_the_right_length(server):
    lengths = {}
    for rate, encoding in ((24000, "pcm_s16le"), (8000, "pcm_mulaw"), (48000, "pcm_f32le")):
        result = post(
            server,
            speech_request(
                f"rate-{rate}",
                "Hello there.",
                output_format={"encoding": encoding, "sample_rate": rate},
            ),
        )
        assert {c["sampling_rate"] for c in result.of_type("chunk")} == {rate}
        lengths[rate] = decode_audio(result.of_type("chunk"), encoding).size

    assert abs(lengths[8000] - lengths[24000] / 3) <= 2
    assert abs(lengths[48000] - lengths[24000] * 2) <= 2
    assert lengths[24000] > 12000  # "Hello there." is more than half a second


# -- malformed requests: every one gets 422 (or 413) naming the bad field, never a 500 -----------

GOOD = speech_request("bad")


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD.items() if k != key}


def _with(**fields: Any) -> dict[str, Any]:
    return {**GOOD, **fields}


def _fmt(**fields: Any) -> dict[str, Any]:
    return _with(output_format={**GOOD["output_format"], **fields})


# (case id, JSON body or raw bytes, content type, expected status, fields that must be named)
MALFORMED: list[tuple[str, Any, str, int, set[str]]] = [
    ("not-json", b"{not json", "application/json", 422, {"body"}),
    ("not-utf8", b"\xff\xfe{}", "application/json", 422, {"body"}),
    ("json-array", [GOOD], "application/json", 422, {"body"}),
    ("deeply-nested", b"[" * 30_000 + b"]" * 30_000, "application/json", 422, {"body"}),
    ("json-string", "hello", "application/json", 422, {"body"}),
    ("wrong-content-type", GOOD, "text/plain", 422, {"content-type"}),
    ("form-content-type", GOOD, "application/x-www-form-urlencoded", 422, {"content-type"}),
    ("missing-context-id", _without("context_id"), "application/json", 422, {"context_id"}),
    ("context-id-not-string", _with(context_id=7), "application/json", 422, {"context_id"}),
    ("context-id-empty", _with(context_id=""), "application/json", 422, {"context_id"}),
    ("missing-transcript", _without("transcript"), "application/json", 422, {"transcript"}),
    ("empty-transcript", _with(transcript=""), "application/json", 422, {"transcript"}),
    ("blank-transcript", _with(transcript="   "), "application/json", 422, {"transcript"}),
    ("oversized-transcript", _with(transcript="a" * 4001), "application/json", 422, {"transcript"}),
    ("transcript-not-string", _with(transcript=["hi"]), "application/json", 422, {"transcript"}),
    (
        "unknown-tag",
        _with(transcript="Hi <pitch ratio='2'/> there."),
        "application/json",
        422,
        {"transcript"},
    ),
    (
        "bad-tag-ratio",
        _with(transcript="Hi <speed ratio='fast'/> there."),
        "application/json",
        422,
        {"transcript"},
    ),
    ("unknown-language", _with(language="xx"), "application/json", 422, {"language"}),
    ("language-not-string", _with(language=1), "application/json", 422, {"language"}),
    ("missing-language", _without("language"), "application/json", 422, {"language"}),
    (
        "unknown-voice",
        _with(voice={"mode": "id", "id": "af_heart"}),
        "application/json",
        422,
        {"voice.id"},
    ),
    (
        "voice-mode-not-id",
        _with(voice={"mode": "embedding", "id": "jf_alpha"}),
        "application/json",
        422,
        {"voice.mode"},
    ),
    ("voice-as-string", _with(voice="jf_alpha"), "application/json", 422, {"voice"}),
    ("missing-voice", _without("voice"), "application/json", 422, {"voice"}),
    (
        "unknown-voice-id-alias",
        {**_without("voice"), "voice_id": {"mode": "id", "id": "nobody"}},
        "application/json",
        422,
        {"voice_id.id"},
    ),
    (
        "voice-and-voice-id",
        {**GOOD, "voice_id": GOOD["voice"]},
        "application/json",
        422,
        {"voice_id"},
    ),
    (
        "missing-output-format",
        _without("output_format"),
        "application/json",
        422,
        {"output_format"},
    ),
    (
        "bad-sample-rate",
        _fmt(sample_rate=12345),
        "application/json",
        422,
        {"output_format.sample_rate"},
    ),
    (
        "sample-rate-as-string",
        _fmt(sample_rate="24000"),
        "application/json",
        422,
        {"output_format.sample_rate"},
    ),
    ("bad-encoding", _fmt(encoding="mp3"), "application/json", 422, {"output_format.encoding"}),
    ("wav-container", _fmt(container="wav"), "application/json", 422, {"output_format.container"}),
    ("unknown-format-field", _fmt(bitrate=128), "application/json", 422, {"output_format.bitrate"}),
    ("unknown-field", _with(model_id="sonic-3"), "application/json", 422, {"model_id"}),
    (
        "speed-not-number",
        _with(generation_config={"speed": "fast"}),
        "application/json",
        422,
        {"generation_config.speed"},
    ),
    (
        "speed-out-of-range",
        _with(generation_config={"speed": 10}),
        "application/json",
        422,
        {"generation_config.speed"},
    ),
    (
        "timestamps-flag-not-bool",
        _with(add_timestamps="yes"),
        "application/json",
        422,
        {"add_timestamps"},
    ),
    (
        "several-bad-fields",
        {**_fmt(sample_rate=5), "language": "klingon", "extra": 1, "context_id": None},
        "application/json",
        422,
        {"output_format.sample_rate", "language", "extra", "context_id"},
    ),
    ("oversized-body", _with(transcript="a" * 70_000), "application/json", 413, {"body"}),
]


def _send_malformed(server: Any, body: Any, content_type: str) -> StreamResult:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return post(server, None, raw=raw, headers={"Content-Type": content_type})


@pytest.mark.parametrize(
    ("body", "content_type", "status", "fields"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_request_gets_4xx_naming_every_bad_field(
    server, body, content_type, status, fields
):
    result = _send_malformed(server, body, content_type)

    assert result.status == status
    assert result.body is not None
    named = {e["field"] for e in result.body["errors"]}
    assert fields <= named, result.body
    for field in fields:
        assert field in result.body["message"]


def test_unknown_language_and_voice_name_the_supported_sets(server):
    result = _send_malformed(
        server, _with(language="xx", voice={"mode": "id", "id": "zz"}), "application/json"
    )
    messages = {e["field"]: e["message"] for e in result.body["errors"]}
    assert "en" in messages["language"] and "ja" in messages["language"]
    assert "jf_alpha" in messages["voice.id"]


def test_chunked_oversized_body_gets_413_before_it_is_read_whole(server):
    async def endless() -> Any:
        for _ in range(200):  # 200 × 4 KiB, far past the 64 KiB bound
            yield b"x" * 4096

    async def scenario() -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.post(
                    f"{server.base}/invocations",
                    data=endless(),
                    headers={"Content-Type": "application/json"},
                ) as resp:
                    return resp.status
            except aiohttp.ClientError:
                return -1  # the server may close before the client finished sending

    status = asyncio.run(scenario())
    assert status in (413, -1)
    refusals = [r for r in server.records if r.get("msg") == "generation_end"]
    assert all(r["outcome"] != "engine_error" for r in refusals)


def test_server_keeps_serving_after_a_burst_of_malformed_requests(server):
    async def scenario() -> tuple[list[int], StreamResult]:
        async with aiohttp.ClientSession() as session:
            bad = await asyncio.gather(
                *(
                    post_stream(
                        session,
                        server.base,
                        None,
                        raw=body if isinstance(body, bytes) else json.dumps(body).encode(),
                        headers={"Content-Type": content_type},
                    )
                    for _, body, content_type, _, _ in MALFORMED
                )
            )
            good = await post_stream(session, server.base, speech_request("after", "Fine."))
            return [r.status for r in bad], good

    statuses, good = asyncio.run(scenario())
    assert len(statuses) >= 25 and set(statuses) <= {413, 422}
    assert good.status == 200 and good.events[-1]["type"] == "done"


def test_every_log_line_is_json_and_emf_lines_use_the_shared_names(server):
    post(server, speech_request("emf-1", "Fine."))

    assert all(r.get("msg") != "__not_json__" for r in server.records), "every stdout line is JSON"
    emf = [r for r in server.records if "_aws" in r]
    assert emf
    for record in emf:
        directive = record["_aws"]
        assert isinstance(directive["Timestamp"], int)
        (metrics_block,) = directive["CloudWatchMetrics"]
        assert metrics_block["Namespace"] == NAMESPACE
        assert metrics_block["Dimensions"] == [list(DIMENSIONS)]
        for dimension in DIMENSIONS:
            assert isinstance(record[dimension], str)
        for metric in metrics_block["Metrics"]:
            assert metric["Unit"] == METRIC_UNITS[metric["Name"]]
            assert isinstance(record[metric["Name"]], float)
    named = {m["Name"] for r in emf for m in r["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"FirstChunkLatency", "QueueWait", "InFlight"} <= named
    end = server.wait_for(
        lambda r: r.get("msg") == "generation_end" and r["request_id"].endswith("-emf-1"),
        timeout=10,
    )
    assert re.fullmatch(r"[0-9a-f-]{36}-emf-1", end["request_id"])
    assert end["outcome"] == "done"


def test_queue_wait_excludes_service_time_in_serial_mode(start_server):
    """Two requests at once on a one-at-a-time engine: the second's wait is QueueWait, and
    FirstChunkLatency counts only from when the model began its first segment (SPEC §3)."""
    serial = start_server({"ENGINE_MODE": "serial"})
    serial.wait_ready()

    async def both() -> None:
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(
                post_stream(session, serial.base, speech_request("qw-a", "Fine, thanks.")),
                post_stream(session, serial.base, speech_request("qw-b", "Fine, thanks.")),
            )

    asyncio.run(both())
    metrics = {}
    for context in ("qw-a", "qw-b"):
        record = serial.wait_for(
            lambda r, c=context: "FirstChunkLatency" in r and r["request_id"].endswith(f"-{c}"),
            timeout=30,
        )
        metrics[context] = (record["QueueWait"], record["FirstChunkLatency"])
    (first_wait, first_service), (second_wait, second_service) = sorted(metrics.values())
    # The second waited for (most of) the first's whole service; the first hardly waited.
    assert second_wait > 0.5 * first_service
    assert first_wait < 0.5 * second_wait
    # Neither service time swallows the other's: each is about one utterance, not two.
    assert second_service < first_service + second_wait
