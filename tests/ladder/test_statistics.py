"""Per-rung statistics from raw samples: windows, percentiles, in-flight, client-bound, Q_max."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.artifacts.files import load_artifact, write_artifact
from tts_bench.artifacts.fingerprint import Fingerprint, Transport, qmax_filename
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.statistics import (
    CpuReading,
    build_qmax_artifact,
    client_cpu_percent,
    ladder_rungs,
    rung_statistics,
)
from tts_bench.measure.samples import (
    Outcome,
    Sample,
    mean_in_flight,
    read_samples,
    samples_path,
    write_samples,
)

from .synthetic import closed_loop

FP = Fingerprint(
    model="kokoro-82m",
    instance_type="local-test cpu",
    image_digest="sha256:" + "1" * 64,
    performance_env={"ENGINE_MODE": "concurrent"},
    transport=Transport.LOCAL_HTTP,
)


def test_closed_loop_rung_holds_n_and_percentiles_match_raw_samples():
    samples = closed_loop(10, 0.0, 30.0, latency_ms=200)
    rung = rung_statistics(samples, [], 10, (20.0, 30.0), slo_ms=1000)
    inside = [s for s in samples if 20.0 <= s.end < 30.0]
    ttfab = [s.ttfab_ms for s in inside]
    assert rung.completed == rung.ok == len(inside)
    assert rung.ttfab_p95_ms == np.percentile(ttfab, 95)
    assert rung.ttfab_p50_ms == np.percentile(ttfab, 50)
    assert rung.ttfab_p99_ms == np.percentile(ttfab, 99)
    assert rung.latency_p95_ms == np.percentile([s.latency_ms for s in inside], 95)
    assert rung.achieved_rps == pytest.approx(len(inside) / 10.0)
    assert rung.client_mean_in_flight == pytest.approx(10, rel=0.01)
    assert rung.usable and rung.meets_slo and rung.passes


def test_samples_of_other_rungs_and_outside_the_window_do_not_count():
    samples = closed_loop(5, 0.0, 30.0, 100) + closed_loop(7, 0.0, 30.0, 5000, rung=99)
    rung = rung_statistics(samples, [], 5, (20.0, 30.0), slo_ms=1000)
    assert rung.ttfab_p95_ms is not None and rung.ttfab_p95_ms < 100
    # the other rung's requests still load the window: in-flight counts them
    assert rung.client_mean_in_flight == pytest.approx(12, rel=0.02)


def test_think_time_makes_the_rung_client_bound_not_a_pass():
    samples = closed_loop(10, 0.0, 30.0, latency_ms=100, gap_ms=20)
    rung = rung_statistics(samples, [], 10, (20.0, 30.0), slo_ms=1000)
    assert rung.meets_slo and not rung.usable and not rung.passes
    assert "below 95% of 10" in rung.unusable_reason


def test_busy_load_generator_makes_the_rung_unusable():
    cpu = [CpuReading("host:1", t, 0.95 * t) for t in range(0, 31)]
    rung = rung_statistics(closed_loop(4, 0.0, 30.0, 100), cpu, 4, (20.0, 30.0), slo_ms=1000)
    assert rung.client_cpu_percent == pytest.approx(95)
    assert not rung.usable and "95 % CPU" in rung.unusable_reason


def test_more_than_one_percent_failures_fail_the_slo():
    samples = closed_loop(4, 0.0, 30.0, 100, fail_every=20)
    rung = rung_statistics(samples, [], 4, (20.0, 30.0), slo_ms=1000)
    assert rung.errors > 0 and rung.ok == rung.completed - rung.errors
    assert rung.usable and not rung.meets_slo


def test_cancelled_requests_load_the_window_but_are_not_results():
    cancelled = Sample(3, "h:1", 19.0, 31.0, None, 12000.0, Outcome.CANCELLED)
    ok = Sample(3, "h:1", 19.0, 25.0, 100.0, 6000.0, Outcome.OK)
    rung = rung_statistics([cancelled, ok], [], 3, (20.0, 30.0), slo_ms=1000)
    assert rung.completed == 1
    assert rung.client_mean_in_flight == pytest.approx((10 + 5) / 10)


@given(
    intervals=st.lists(
        st.tuples(st.floats(0, 100), st.floats(0, 50)).map(lambda p: (p[0], p[0] + p[1])),
        max_size=30,
    ),
    w0=st.floats(0, 100),
    width=st.floats(0.1, 100),
)
def test_mean_in_flight_is_the_time_average_of_outstanding_requests(intervals, w0, width):
    samples = [Sample(1, "h:1", a, b, 1.0, 1.0, Outcome.OK) for a, b in intervals]
    w1 = w0 + width
    grid = np.linspace(w0, w1, 2001)[:-1] + width / 4000  # midpoints of 2000 slices
    sampled = np.mean([sum(a <= t < b for a, b in intervals) for t in grid]) if intervals else 0.0
    exact = mean_in_flight(samples, w0, w1)
    assert 0 <= exact <= len(intervals)
    assert exact == pytest.approx(sampled, abs=len(intervals) * 2 / 2000 + 1e-9)


def test_client_cpu_needs_readings_spanning_the_window():
    assert client_cpu_percent([CpuReading("a", 20.0, 1.0)], 20.0, 30.0) is None
    readings = [
        CpuReading("a", 20.0, 1.0),
        CpuReading("a", 30.0, 3.0),
        CpuReading("b", 20, 0),
        CpuReading("b", 30, 9),
    ]
    assert client_cpu_percent(readings, 20.0, 30.0) == pytest.approx(90)


def ladder_samples(schedule: LadderSchedule, t0: float, latency_of) -> list[Sample]:
    out = []
    for i, users in enumerate(schedule.rungs):
        start = t0 + schedule.rung_start_s(i)
        out += closed_loop(users, start, start + schedule.hold_s, latency_of(users))
    return out


def test_q_max_is_the_highest_passing_rung_below_the_first_failure(tmp_path):
    schedule = LadderSchedule((1, 2, 4, 8, 16), hold_s=20, measure_s=10, idle_s=2)
    t0 = 1_000_000.0
    samples = ladder_samples(schedule, t0, lambda n: 100.0 * n)  # TTFAB grows with N
    rungs = ladder_rungs(samples, [], schedule, t0, slo_ms=250, now=t0 + schedule.duration_s)
    # TTFAB = 40 % of latency, up to 1.4 × in the spread: c=4 gives ≤ 224 ms, c=8 ≥ 320 ms
    assert [r.concurrency for r in rungs] == [1, 2, 4, 8]
    assert [r.passes for r in rungs] == [True, True, True, False]
    artifact = build_qmax_artifact(rungs, FP, schedule, 250, Provenance.now("measured", "test"))
    assert (artifact.q_max, artifact.bracketed) == (4, True)
    assert artifact.uncontended_service_s.mean == pytest.approx(rungs[0].latency_mean_ms / 1000)
    path = write_artifact(artifact, tmp_path, qmax_filename(FP))
    assert load_artifact(path, QmaxArtifact) == artifact


def test_rungs_whose_window_has_not_closed_are_left_out():
    schedule = LadderSchedule((1, 2), hold_s=20, measure_s=10, idle_s=0)
    samples = ladder_samples(schedule, 0.0, lambda n: 50.0)
    rungs = ladder_rungs(samples, [], schedule, 0.0, slo_ms=1000, now=39.0)
    assert [r.concurrency for r in rungs] == [1]
    assert rungs[0].passes  # unbracketed: nothing above it failed


def test_samples_file_round_trips_exactly(tmp_path):
    samples = closed_loop(3, 1e9, 1e9 + 5, 123.456, fail_every=7)
    samples.append(Sample(None, "h:2", 1e9 + 1 / 3, 1e9 + 2 / 3, None, 333.3, Outcome.CANCELLED))
    path = write_samples(samples_path(tmp_path / "qmax-x.json"), samples)
    assert path.name == "qmax-x.json.samples.csv.gz"
    assert sorted(read_samples(path), key=lambda s: (s.start, s.worker)) == sorted(
        samples, key=lambda s: (s.start, s.worker)
    )
