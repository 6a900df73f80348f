"""Playback: stalls of a listener who starts at the first audio byte, on crafted chunk timings."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.measure.playback import (
    Chunk,
    PlaybackError,
    check_underrun_slo,
    playback,
    playback_figures,
)
from tts_bench.measure.samples import Outcome, Sample
from tts_bench.measure.transport.stream_events import base64_audio_seconds

CHUNK_S = 0.02  # the server's chunks carry at most 20 ms of audio


def steady(count: int, every_s: float, start_s: float = 1.0) -> list[Chunk]:
    return [Chunk(start_s + i * every_s, CHUNK_S) for i in range(count)]


def test_no_stall_when_audio_arrives_faster_than_it_plays():
    heard = playback(steady(100, every_s=0.01))
    assert (heard.stalls, heard.stall_s, heard.underran) == (0, 0.0, False)
    assert heard.audio_s == pytest.approx(2.0)


def test_a_burst_then_a_late_segment_is_one_stall():
    # 1 s of audio at t=1, the next segment's first chunk at t=2.5: 0.5 s of silence.
    first = [Chunk(1.0, CHUNK_S) for _ in range(50)]
    second = [Chunk(2.5 + i * 0.001, CHUNK_S) for i in range(50)]
    heard = playback(first + second)
    assert heard.stalls == 1
    assert heard.stall_s == pytest.approx(0.5)


def test_stalls_everywhere_when_every_chunk_is_late():
    heard = playback(steady(10, every_s=0.05))  # 20 ms of audio every 50 ms: 30 ms short each time
    assert heard.stalls == 9
    assert heard.stall_s == pytest.approx(9 * 0.03)


@given(
    st.lists(st.tuples(st.floats(0, 5), st.floats(0, 0.5)), min_size=1, max_size=60).map(
        lambda pairs: sorted(pairs)
    )
)
def test_playback_ends_at_first_byte_plus_audio_plus_stalls(pairs):
    """Whatever the timings: the listener's last sample plays at first + audio + stall, and
    that is never before the last chunk arrived plus its own audio."""
    chunks = [Chunk(t, d) for t, d in pairs]
    heard = playback(chunks)
    end = chunks[0].arrival_s + heard.audio_s + heard.stall_s
    assert heard.stall_s >= 0 and heard.stalls <= len(chunks) - 1
    assert end >= chunks[-1].arrival_s + chunks[-1].audio_s - 1e-9
    assert (heard.stalls == 0) == (heard.stall_s == 0)


@given(st.binary(max_size=4000), st.sampled_from([8000, 16000, 24000, 48000]))
def test_audio_seconds_from_the_base64_length_match_the_decoded_bytes(raw, rate):
    raw = raw[: len(raw) // 2 * 2]  # whole 16-bit samples
    encoded = base64.b64encode(raw).decode("ascii")
    assert base64_audio_seconds(encoded, rate) == pytest.approx(len(raw) / (2 * rate))


def sample(latency_ms: float, audio_ms: float | None, stall_ms: float | None) -> Sample:
    return Sample(4, "h:1", 0.0, latency_ms / 1000, 100.0, latency_ms, Outcome.OK,
                  audio_ms=audio_ms, stall_ms=stall_ms)  # fmt: skip


def test_rung_figures_over_requests_that_carried_audio():
    ok = [sample(1000, 2000, 0.0), sample(3000, 1000, 250.0), sample(500, None, None)]
    figures = playback_figures(ok)
    assert figures.underrun_share == 0.5  # one of the two that carried audio stalled
    assert figures.rtf_p50 == pytest.approx((0.5 + 3.0) / 2)
    assert figures.stall_ms_p95 == pytest.approx(0.95 * 250.0)
    assert playback_figures([sample(500, None, None)]).underrun_share is None


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5, float("nan")])
def test_an_underrun_slo_outside_0_1_is_refused(share):
    with pytest.raises(PlaybackError):
        check_underrun_slo(share)


def test_samples_keep_playback_and_intended_times_through_file_and_wire(tmp_path):
    from tts_bench.measure.samples import read_samples, write_samples

    s = Sample(None, "h:1", 10.5, 12.0, 300.0, 1500.0, Outcome.OK, "", 120.0,
               audio_ms=2100.0, stall_ms=35.5, intended_start=10.25)  # fmt: skip
    assert read_samples(write_samples(tmp_path / "s.csv.gz", [s])) == [s]
    assert Sample.from_wire(s.to_wire()) == s
    # A worker still on the older wire format (no playback fields) is read as before.
    assert Sample.from_wire(s.to_wire()[:9]).audio_ms is None


@pytest.mark.parametrize(("underrun_slo", "meets"), [(None, True), (0.6, True), (0.4, False)])
def test_underrun_slo_fails_a_rung_with_more_stalled_streams(underrun_slo, meets):
    from tts_bench.measure.ladder.statistics import rung_statistics

    # Two users back to back over 10 s, every other request stalled: underrun share 0.5.
    samples = [
        Sample(2, "h:1", t, t + 1.0, 200.0, 1000.0, Outcome.OK, audio_ms=2000.0,
               stall_ms=50.0 if i % 2 else 0.0)
        for i, t in enumerate(x / 2 for x in range(20))
    ]  # fmt: skip
    rung = rung_statistics(samples, [], 2, (1.0, 10.0), 3000.0, underrun_slo)
    assert rung.underrun_share == pytest.approx(0.5, abs=0.06)
    assert rung.meets_slo is meets
