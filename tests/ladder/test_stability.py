"""Stability: a rung is stable when its window thirds' p95 TTFAB agree within 10 %."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tts_bench.measure.ladder.stability import STABILITY_TOLERANCE, stability, sub_windows
from tts_bench.measure.ladder.statistics import rung_statistics
from tts_bench.measure.samples import Outcome, Sample

from .synthetic import closed_loop


def ended_at(end: float, ttfab_ms: float) -> Sample:
    return Sample(4, "h:1", end - 1.0, end, ttfab_ms, 1000.0, Outcome.OK)


def test_a_steady_closed_loop_is_stable():
    samples = closed_loop(4, 0.0, 40.0, latency_ms=500.0)
    rung = rung_statistics(samples, [], 4, (10.0, 40.0), slo_ms=3000)
    assert rung.stable is True and len(rung.sub_window_ttfab_p95_ms) == 3


@given(st.floats(0.0, 3.0))
def test_a_growing_queue_is_unstable_past_the_tolerance(growth):
    # p95 TTFAB grows by `growth` from the first third to the last.
    thirds = [100.0, 100.0 * (1 + growth) ** 0.5, 100.0 * (1 + growth)]
    done = [ended_at(a + 0.5 + i * 0.1, v) for (a, _), v in zip(sub_windows(0, 30), thirds, strict=True) for i in range(5)]  # fmt: skip
    verdict = stability(done, (0.0, 30.0))
    assert verdict.stable is (growth <= STABILITY_TOLERANCE)
    assert verdict.spread is not None and abs(verdict.spread - growth) < 1e-9


def test_an_empty_third_is_unstable():
    done = [ended_at(1.0, 100.0), ended_at(25.0, 100.0)]
    verdict = stability(done, (0.0, 30.0))
    assert verdict.sub_window_p95_ms[1] is None and not verdict.stable
