"""Pure parts of the server: the request schema, audio formats, the gate, EMF, settings, markers."""

from __future__ import annotations

import argparse
import io
import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tts_server.admission import AdmissionGate, Refusal, retry_after_ms
from tts_server.audio_format import (
    BYTES_PER_SAMPLE,
    encode,
    encoded_chunks,
    resample,
    samples_per_chunk,
)
from tts_server.emf import emf_record
from tts_server.engine import create_engine
from tts_server.flags import parse_serve_argv
from tts_server.logs import ServerLog
from tts_server.protocol import SAMPLE_RATES, parse_request
from tts_server.settings import ServerSettings, SettingsError, settings_from_args

from tests.server.server_client import speech_request
from tts_bench.telemetry import DIMENSIONS, NAMESPACE, STARTUP_MARKERS


@pytest.fixture(scope="module")
def engine():
    """The real engine, not loaded: `check` and the voice/language sets need no weights."""
    return create_engine()


# -- request schema -------------------------------------------------------------------------


def test_a_valid_request_parses_with_voice_id_as_an_alias(engine):
    body = speech_request("c-1")
    body["voice_id"] = body.pop("voice")
    request, problems = parse_request(body, engine, 4000)
    assert problems == [] and request is not None
    assert request.synthesis_request().voice == "jf_alpha"


FIELDS = ["context_id", "transcript", "language", "voice", "output_format"]
WRONG_VALUES = st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=2), st.just(""))


@settings(max_examples=40, deadline=None)
@given(broken=st.dictionaries(st.sampled_from(FIELDS), WRONG_VALUES, min_size=1))
def test_every_broken_field_is_named_at_once(engine, broken):
    body = {**speech_request("c-1"), **broken}
    request, problems = parse_request(body, engine, 4000)
    assert request is None
    named = {p.field.split(".")[0] for p in problems}
    assert set(broken) <= named


@settings(max_examples=30, deadline=None)
@given(rate=st.integers(min_value=-10, max_value=200_000))
def test_only_the_common_sample_rates_are_accepted(engine, rate):
    body = speech_request("c-1", output_format={"sample_rate": rate})
    request, problems = parse_request(body, engine, 4000)
    assert (request is not None) == (rate in SAMPLE_RATES)
    if request is None:
        assert [p.field for p in problems] == ["output_format.sample_rate"]


# -- audio formats --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=-32767, max_value=32767), min_size=1, max_size=300))
def test_g711_encoders_match_the_reference_codec(samples):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")  # the stdlib codec, gone in Python 3.13
    pcm = np.array(samples, dtype=np.int16)
    audio = pcm.astype(np.float32) / 32767.0
    reference = pcm.tobytes()
    assert encode(audio, "pcm_mulaw") == audioop.lin2ulaw(reference, 2)
    assert encode(audio, "pcm_alaw") == audioop.lin2alaw(reference, 2)
    assert encode(audio, "pcm_s16le") == reference


@pytest.mark.parametrize("rate", SAMPLE_RATES)
def test_resampling_keeps_a_tone_and_gives_the_right_length(rate):
    t = np.arange(24000) / 24000
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    out = resample(tone, 24000, rate)
    assert out.size == rate
    expected = np.sin(2 * np.pi * 440 * np.arange(rate) / rate)
    assert np.max(np.abs(out[100:-100] - expected[100:-100])) < 1e-3


def _level(out: np.ndarray, rate: int, freq: float) -> float:
    """The amplitude of `freq` in `out` (a least-squares fit), the first and last tenth left
    out (the filter's start-up)."""
    core = out[rate // 10 : -(rate // 10)].astype(np.float64)
    n = np.arange(rate // 10, rate // 10 + core.size) / rate
    basis = np.stack([np.sin(2 * np.pi * freq * n), np.cos(2 * np.pi * freq * n)], axis=1)
    return float(np.hypot(*np.linalg.lstsq(basis, core, rcond=None)[0]))


@settings(max_examples=40, deadline=None)
@given(rate=st.sampled_from(SAMPLE_RATES), share=st.floats(0.02, 0.85))
def test_a_tone_below_the_lower_nyquist_keeps_its_level(rate, share):
    freq = share * min(rate, 24000) / 2
    t = np.arange(24000) / 24000
    out = resample(np.sin(2 * np.pi * freq * t).astype(np.float32), 24000, rate)
    assert out.size == rate and out.dtype == np.float32
    assert abs(20 * np.log10(_level(out, rate, freq))) < 0.01  # dB


@settings(max_examples=40, deadline=None)
@given(rate=st.sampled_from([r for r in SAMPLE_RATES if r < 24000]), over=st.floats(1.02, 3.0))
def test_a_tone_above_the_output_nyquist_leaves_no_alias(rate, over):
    """Downsampling removes what the new rate cannot carry instead of folding it back (the
    hand-written filter it replaced let a tone just above 4 kHz through at -8 dB)."""
    freq = min(over * rate / 2, 11900)
    t = np.arange(24000) / 24000
    out = resample(np.sin(2 * np.pi * freq * t).astype(np.float32), 24000, rate)
    core = out[rate // 10 : -(rate // 10)]
    assert 20 * np.log10(np.sqrt(2 * np.mean(core.astype(np.float64) ** 2)) + 1e-12) < -90


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=5000),
    rate=st.sampled_from(SAMPLE_RATES),
    encoding=st.sampled_from(sorted(BYTES_PER_SAMPLE)),
)
def test_chunks_hold_at_most_20_ms_and_all_the_audio(n, rate, encoding):
    audio = np.zeros(n, dtype=np.float32)
    chunks = encoded_chunks(audio, 24000, rate, encoding)
    width = BYTES_PER_SAMPLE[encoding]
    assert all(0 < len(c) <= samples_per_chunk(rate) * width for c in chunks)
    assert sum(len(c) for c in chunks) == round(n * rate / 24000) * width
    assert samples_per_chunk(rate) / rate <= 0.020


# -- admission ------------------------------------------------------------------------------


@settings(max_examples=50)
@given(bound=st.one_of(st.none(), st.integers(1, 5)), ops=st.lists(st.booleans(), max_size=40))
def test_the_gate_never_admits_past_its_bound_and_counts_releases(bound, ops):
    gate, held = AdmissionGate(bound), []
    for admit in ops:
        if admit:
            ticket = gate.admit()
            if bound is not None and len(held) >= bound:
                assert ticket is Refusal.SATURATED
            else:
                held.append(ticket)
        elif held:
            ticket = held.pop()
            ticket.release()
            ticket.release()  # idempotent
        assert gate.in_flight == len(held)
    gate.close()
    assert gate.admit() is Refusal.DRAINING


@given(
    mean=st.one_of(st.none(), st.floats(0, 1000, allow_nan=False)), in_flight=st.integers(0, 500)
)
def test_the_retry_hint_is_bounded(mean, in_flight):
    assert 50 <= retry_after_ms(mean, in_flight) <= 10_000


# -- EMF and logs ---------------------------------------------------------------------------


def test_emf_record_carries_the_shared_namespace_dimensions_and_units():
    record = emf_record(
        {"FirstChunkLatency": 12.5, "InFlight": 3},
        dimensions={"EndpointName": "e", "VariantName": "v"},
        timestamp_ms=1,
    )
    block = record["_aws"]["CloudWatchMetrics"][0]
    assert block["Namespace"] == NAMESPACE and block["Dimensions"] == [list(DIMENSIONS)]
    assert block["Metrics"] == [
        {"Name": "FirstChunkLatency", "Unit": "Milliseconds"},
        {"Name": "InFlight", "Unit": "Count"},
    ]
    assert record["FirstChunkLatency"] == 12.5 and record["EndpointName"] == "e"
    json.dumps(record)


@pytest.mark.parametrize(
    ("metrics", "dimensions"),
    [
        ({"Latency": 1.0}, {"EndpointName": "e", "VariantName": "v"}),
        ({"InFlight": 1}, {"EndpointName": "e"}),
    ],
)
def test_emf_record_refuses_names_the_shared_module_lacks(metrics, dimensions):
    with pytest.raises(ValueError):
        emf_record(metrics, dimensions=dimensions, timestamp_ms=1)


def test_startup_markers_are_json_lines_once_each_in_order():
    stream = io.StringIO()
    log = ServerLog(stream)
    for name in STARTUP_MARKERS:
        log.marker(name)
    with pytest.raises(RuntimeError):
        log.marker("ready")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["marker"] for line in lines] == list(STARTUP_MARKERS)
    assert all(line["msg"] == "startup_marker" and isinstance(line["ts"], float) for line in lines)


# -- settings and flags ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "environ", "expected", "expected_error"),
    [
        ([], {}, {"port": 8080, "max_queue_depth": None, "mode": "concurrent"}, None),
        (
            ["serve", "--port", "0", "--serial"],
            {"MAX_QUEUE_DEPTH": "7"},
            {"port": 0, "mode": "serial", "max_queue_depth": 7},
            None,
        ),
        (
            ["--backend", "torch", "--model-dir", "/opt/ml/model"],
            {"ENGINE_BACKEND": "onnx"},
            {"backend": "torch"},
            None,
        ),
        (
            [],
            {"REQUEST_CEILING_S": "0.5", "DRAIN_DEADLINE_S": "1"},
            {"request_ceiling_s": 0.5, "drain_deadline_s": 1.0},
            None,
        ),
        ([], {"MAX_QUEUE_DEPTH": ""}, {"max_queue_depth": None}, None),
        ([], {"MAX_QUEUE_DEPTH": "0"}, None, "MAX_QUEUE_DEPTH"),
        ([], {"MAX_QUEUE_DEPTH": "many"}, None, "MAX_QUEUE_DEPTH"),
        ([], {"IMAGE_DIGEST": "latest"}, None, "IMAGE_DIGEST"),
        ([], {"ENGINE_MODE": "batched"}, None, "ENGINE_MODE"),
    ],
)
def test_settings_from_flags_and_environment(argv, environ, expected, expected_error):
    args = parse_serve_argv(argv, prog="test")
    if expected_error:
        with pytest.raises(SettingsError, match=expected_error):
            settings_from_args(args, environ)
        return
    built = settings_from_args(args, environ)
    assert {k: getattr(built, k) for k in expected} == expected


def test_tts_bench_serve_has_the_same_flags_as_python_m_tts_server():
    from tts_bench.cli.local import serve

    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["serve", "--backend", "onnx", "--host", "0.0.0.0", "--port", "9", "--serial"]
    )
    assert args.handler is serve.handle
    built = settings_from_args(args, {})
    assert isinstance(built, ServerSettings)
    assert (built.host, built.port, built.mode) == ("0.0.0.0", 9, "serial")
