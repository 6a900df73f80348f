"""A rehearsal's arrivals: the fleet's traffic, thinned by what one request stands for."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tts_bench.errors import TtsBenchError
from tts_bench.rehearse.arrivals import TrafficSpec, rehearsal_arrivals


@pytest.mark.parametrize("thinning", [1.0, 8.0, 160.0])
def test_a_synthetic_spec_is_drawn_at_its_rates_divided_by_the_thinning(thinning: float) -> None:
    spec = TrafficSpec("diurnal:20:400:3600", None, None)
    arrivals = rehearsal_arrivals(spec, thinning, 300.0, seed=3)
    expected = (20 + (400 - 20) / 2) * 3600 / thinning
    assert abs(arrivals.count - expected) < 5 * math.sqrt(expected)
    assert arrivals.duration_s == 3600 and np.all(np.diff(arrivals.times_s) >= 0)
    # the peak is at half the period; the first minute sits at the trough
    assert arrivals.peak_wall_rps(1.0) * thinning > 5 * 20


def test_the_same_seed_draws_the_same_arrivals() -> None:
    spec = TrafficSpec("steady:50", None, 600)
    one, two = (rehearsal_arrivals(spec, 10.0, 300.0, seed=7) for _ in range(2))
    assert np.array_equal(one.times_s, two.times_s)


def test_a_trace_keeps_one_arrival_in_the_thinning(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    times = np.sort(np.random.default_rng(1).uniform(0, 600, 20_000))
    trace.write_text("timestamp_s\n" + "\n".join(f"{t:.4f}" for t in times) + "\n")
    arrivals = rehearsal_arrivals(TrafficSpec(None, trace, None), 20.0, 300.0, seed=1)
    assert abs(arrivals.count - 1000) < 5 * math.sqrt(1000)
    assert set(arrivals.times_s.round(4)) <= set(times.round(4))
    with pytest.raises(TtsBenchError, match="a trace can be thinned, not multiplied"):
        rehearsal_arrivals(TrafficSpec(None, trace, None), 0.5, 300.0, seed=1)
