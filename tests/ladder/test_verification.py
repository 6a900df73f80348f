"""Verification rungs: the levels the plan will use, their schedule after the ladder, and the
`VerificationRung` built from samples and CloudWatch readings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.ladders import SOURCES, qmax_artifact, serial_ladder, ttotal_artifact
from tests.ladder.synthetic import closed_loop
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.schema import LADDER_RATIO_STAT, CloudWatchStat
from tts_bench.measure.ladder import LadderSchedule
from tts_bench.measure.verification import (
    VerificationError,
    VerificationSchedule,
    cloudwatch_ratios,
    verification_levels,
    verification_rung,
)
from tts_bench.planning.plan import PlanRequest, check_basis, derive_plan, derive_thresholds

AVERAGE_60 = CloudWatchStat(statistic="Average", period_s=60)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 500), st.floats(1.01, 1.49))
def test_levels_are_the_plans_thresholds_rounded_to_whole_users(q_max: int, surge: float) -> None:
    qmax = qmax_artifact(serial_ladder(sorted({1, q_max}), service_ms=1))
    request = PlanRequest(peak_rps=10, surge_ratio=surge)
    planned = derive_thresholds(check_basis(qmax, ttotal_artifact(), request), request, qmax)
    out, in_ = verification_levels(q_max, surge)
    assert (out.role, in_.role) == ("scale_out", "scale_in")
    assert (out.at, in_.at) == (planned.c_scale_max, planned.c_scale_min)
    for level in (out, in_):
        # Whole users nearest the threshold (at least one user held).
        assert level.users >= 1 and (abs(level.users - level.at) <= 0.5 or level.at < 0.5)


def test_the_reference_levels() -> None:
    out, in_ = verification_levels(50)
    assert (out.at, out.users, in_.at, in_.users) == (37.5, 38, 25.0, 25)


@pytest.mark.parametrize(("q_max", "surge"), [(50, 1.0), (50, 1.5), (0, 1.25)])
def test_bad_inputs_are_one_line_errors(q_max: int, surge: float) -> None:
    with pytest.raises(VerificationError) as info:
        verification_levels(q_max, surge)
    assert "\n" not in str(info.value)


def test_schedule_follows_the_ladder_with_its_timing() -> None:
    ladder = LadderSchedule(rungs=(1, 5), hold_s=20, measure_s=10, idle_s=5)
    schedule = VerificationSchedule.after(ladder, verification_levels(8), ladder.duration_s)
    assert schedule.window_s(0) == (ladder.duration_s + 10, ladder.duration_s + 20)
    assert [p.users for p in schedule.phases] == [6, 0, 4, 0]
    assert schedule.duration_s == 2 * (20 + 5)
    assert "C_scale_max 6 -> 6 users" in schedule.describe()


def test_ratios_per_statistic_leave_out_what_cloudwatch_did_not_return() -> None:
    ratios = cloudwatch_ratios(
        {
            LADDER_RATIO_STAT: 45.0,
            AVERAGE_60: 30.0,
            CloudWatchStat(statistic="Minimum", period_s=10): None,
        },
        37.5,
    )
    assert ratios == {"Maximum/10s": pytest.approx(1.2), "Average/60s": pytest.approx(0.8)}
    assert cloudwatch_ratios({LADDER_RATIO_STAT: 45.0}, 0.0) == {}


def test_a_held_level_becomes_a_verification_rung_the_plan_uses() -> None:
    level = verification_levels(50)[0]  # 38 users
    samples = closed_loop(38, 0.0, 30.0, latency_ms=200)
    rung = verification_rung(
        level, 1.25, samples, [], (20.0, 30.0), 3000, {LADDER_RATIO_STAT: 34.2}
    )
    assert rung is not None and rung.usable and rung.concurrency == 38
    assert rung.cloudwatch_ratios["Maximum/10s"] == pytest.approx(34.2 / rung.client_mean_in_flight)
    assert (
        verification_rung(level, 1.25, samples, [], (20.0, 30.0), 3000, {LADDER_RATIO_STAT: None})
        is None
    )
    # Into a SageMaker ladder with no per-rung ratio: the target is measured where it sits.
    fp = qmax_artifact(serial_ladder()).fingerprint.model_copy(
        update={"transport": Transport.RESPONSE_STREAM}
    )  # type: ignore[union-attr]
    qmax = qmax_artifact(
        serial_ladder((1, 5, 10, 20, 30, 40, 50, 60), service_ms=55), fingerprint=fp
    )
    qmax = qmax.model_copy(update={"verification": [rung]})
    plan = derive_plan(
        qmax, ttotal_artifact(fingerprint=fp), PlanRequest(peak_rps=10, surge_trials=1), SOURCES
    )
    assert plan.target_units.ratio_rule == "verification-rung"
    assert plan.scale_in_units.ratio_rule == "nearest-rung"  # only the point at 38 was measured
