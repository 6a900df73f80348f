"""The Sonic-3 stand-in keeps the contract it was written from, and a real ladder under
`--contract sonic3` measures it: Q_max at most 4 and bracketed, every 429 a refusal (issue 39)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator

import aiohttp
import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.samples import Outcome, read_samples, samples_path
from tts_bench.measure.transport.contract import SONIC3
from tts_bench.measure.transport.stream_events import StreamReading

from .conftest import CORPORA
from .sonic3_standin import StandIn, StandInSettings


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn(StandInSettings(rtf=0.2)) as server:
        yield server


def body(**changes: object) -> dict:
    request = SONIC3.body(Utterance("Hello there, how are you today?", "en"), "ctx")
    return {**request, **changes}


async def post(url: str, payload: object) -> tuple[int, list[dict]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + "/invocations", json=payload) as response,
    ):
        text = await response.text()
    if response.status != 200:
        return response.status, [json.loads(text)]
    return 200, [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"transcript": ""}, "transcript"),
        ({"language": "xx"}, "language"),
        (
            {"output_format": {"container": "wav", "encoding": "pcm", "sample_rate": 44100}},
            "output_format",
        ),
        (
            {"output_format": {"container": "raw", "encoding": "pcm", "sample_rate": 96000}},
            "output_format",
        ),
        ({"voice_id": {"mode": "embedding", "id": "v"}}, "voice_id"),
        ({"add_timestamps": "yes"}, "add_timestamps"),
        ({"speed": 2}, "speed: not a field"),
        ({"context_id": None}, "context_id"),
    ],
)
def test_bad_input_is_422_naming_the_field(standin, changes, named) -> None:
    status, (answer,) = asyncio.run(post(standin.url, body(**changes)))
    assert status == 422 and named in answer["message"]


def test_it_streams_20_ms_chunks_at_the_requested_rate_then_done(standin) -> None:
    fmt = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050}
    status, events = asyncio.run(post(standin.url, body(output_format=fmt, add_timestamps=True)))
    assert status == 200
    chunks = [e for e in events if e["type"] == "chunk"]
    assert len(chunks) > 1 and events[-1] == {
        "type": "done", "context_id": "ctx", "status_code": 200, "done": True
    }  # fmt: skip
    for chunk in chunks:
        samples = len(base64.b64decode(chunk["data"])) // 2
        assert chunk["sampling_rate"] == 22050 and 0 < samples <= 22050 * 0.02
        assert chunk["step_time"] == pytest.approx(samples / 22050 * 0.2)
        assert chunk["status_code"] == 206 and chunk["done"] is False
    (stamps,) = [e for e in events if e["type"] == "timestamps"]
    assert stamps["word_timestamps"]["words"][0] == "Hello"
    # The one reader, under the contract, reads the stream as ok with audio.
    reading = StreamReading("ctx", rules=SONIC3.events)
    assert any(reading.feed(json.dumps(e)) for e in events)
    assert reading.end() is Outcome.OK and reading.ttfab_ms is not None


def test_no_timestamps_unless_asked(standin) -> None:
    _, events = asyncio.run(post(standin.url, body()))
    assert {e["type"] for e in events} == {"chunk", "done"}


def test_the_fifth_generation_is_refused_with_429(standin) -> None:
    long = body(transcript="word " * 100)  # 10 s of audio at RTF 0.2: 2 s each

    async def crowd() -> list[int]:
        async with aiohttp.ClientSession() as session:
            held = [await session.post(standin.url + "/invocations", json=long) for _ in range(4)]
            async with session.post(standin.url + "/invocations", json=long) as fifth:
                status = fifth.status
            for response in held:
                response.close()
            return [*(r.status for r in held), status]

    assert asyncio.run(crowd()) == [200, 200, 200, 200, 429]


@pytest.mark.slow
def test_a_ladder_under_sonic3_brackets_qmax_at_4_counting_each_429_refused(
    standin, tmp_path
) -> None:
    from tts_bench.cli import main

    code = main([
        "qmax", "--host", standin.url, "--contract", "sonic3", "--model", "sonic-3",
        "--rungs", "4,5", "--hold-s", "6", "--measure-s", "4", "--idle-s", "0",
        "--slo-ms", "5000", "--corpus", str(CORPORA / "short.txt"), "--out", str(tmp_path),
    ])  # fmt: skip
    assert code == 0
    (path,) = tmp_path.glob("qmax-*.json")
    artifact = load_artifact(path, QmaxArtifact)
    assert (artifact.q_max, artifact.bracketed) == (4, True)
    assert artifact.provenance.kind == "emulated" and path.name.endswith("-emulated.json")
    assert artifact.fingerprint.contract == SONIC3.ref
    four, five = artifact.rungs
    assert (four.concurrency, four.rejected, four.errors) == (4, 0, 0) and four.ok > 0
    assert five.rejected > 0 and five.errors == 0 and not five.meets_slo
    # The refused user backs off: a few refusals a second, not the ~1,000 of a tight loop.
    assert five.rejected / artifact.ladder.measure_s < 20
    samples = read_samples(samples_path(path))
    refused = [s for s in samples if s.outcome is Outcome.REJECTED]
    assert refused and all("HTTP 429" in s.detail for s in refused)
    assert not [s for s in samples if s.outcome is Outcome.ERROR]
    ok = [s for s in samples if s.outcome is Outcome.OK]
    assert all(s.ttfab_ms is not None and s.ttfab_ms < s.latency_ms for s in ok)
