"""The clairvoyant fleet (`simulate.oracle`): a day worked by hand, and its bounds on any day."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tts_bench.simulate.oracle import minute_rates, oracle_fleet
from tts_bench.simulate.traffic import Traffic


def day(rates_rps: list[float], tick_s: float = 10.0) -> Traffic:
    """Whole minutes at the given rates, in ticks of `tick_s`."""
    per_minute = round(60 / tick_s)
    counts = np.repeat(np.round(np.asarray(rates_rps) * tick_s).astype(np.int64), per_minute)
    return Traffic(tick_s=tick_s, counts=counts, description="by hand")


def test_a_day_worked_by_hand() -> None:
    # λ_out 10 rps, a 120 s lead. Instances needed per minute: 1 3 3 1 1 1 2 1 1 3.
    # 1st: all 600 s, there at time 0.
    # 2nd: minutes 1-2 (60-180 s): 120 s + 60 s of start-up (not before time 0); the gap to
    #      minute 6 is 180 s > 120 s, so released; minutes 6-9 (360-600 s, the 120 s gap
    #      before minute 9 kept) 240 s + 120 s. 540 s, 2 launches.
    # 3rd: minutes 1-2, 120 s + 60 s; minute 9, 60 s + 120 s. 360 s, 2 launches.
    oracle = oracle_fleet(day([5, 25, 25, 5, 5, 5, 15, 5, 5, 30]), 10.0, 120.0)
    assert oracle.instance_seconds == pytest.approx(600 + 540 + 360)
    assert (oracle.launches, oracle.peak) == (4, 3)


def test_a_short_last_minute_is_read_at_its_own_length() -> None:
    traffic = Traffic(tick_s=10.0, counts=np.array([100] * 6 + [100] * 3), description="90 s")
    rates, lengths = minute_rates(traffic)
    assert rates.tolist() == pytest.approx([10.0, 10.0])
    assert lengths.tolist() == [60.0, 30.0]
    assert oracle_fleet(traffic, 10.0, 0.0).instance_seconds == pytest.approx(90.0)


@settings(max_examples=200, deadline=None)
@given(
    rates=st.lists(st.floats(0, 500, allow_nan=False), min_size=1, max_size=90),
    per_instance=st.floats(0.5, 50),
    lead_s=st.floats(0, 900),
)
def test_it_holds_what_each_minute_needs_and_never_more_than_the_peak_all_day(
    rates: list[float], per_instance: float, lead_s: float
) -> None:
    traffic = day(rates)
    oracle = oracle_fleet(traffic, per_instance, lead_s)
    offered, lengths = minute_rates(traffic)
    needed = np.maximum(1, np.ceil(offered / per_instance - 1e-9))
    assert oracle.instance_seconds >= float((needed * lengths).sum()) - 1e-6
    assert oracle.instance_seconds <= oracle.peak * traffic.duration_s + 1e-6
