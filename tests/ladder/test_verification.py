"""Verification rungs: the levels the plan will use, the ladder of their own they are held as,
and the `VerificationRung` built from a held rung and CloudWatch's readings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.ladders import SOURCES, qmax_artifact, serial_ladder, ttotal_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.schema import LADDER_RATIO_STAT, CloudWatchStat, LadderSettings
from tts_bench.measure.cloudwatch_join import MetricPoint
from tts_bench.measure.ladder import LadderSchedule
from tts_bench.measure.live_ladder import HeldVerification, held_rungs
from tts_bench.measure.verification import (
    VerificationError,
    cloudwatch_ratios,
    describe_verification,
    held_by_the_ladder,
    verification_ladder,
    verification_levels,
    verification_rungs,
)
from tts_bench.planning.plan import PlanRequest, check_basis, derive_plan, derive_thresholds

AVERAGE_60 = CloudWatchStat(statistic="Average", period_s=60)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 500), st.floats(1.01, 1.49))
def test_levels_are_the_plans_thresholds_rounded_to_whole_users(q_max: int, surge: float) -> None:
    qmax = qmax_artifact(serial_ladder(sorted({1, q_max}), service_ms=1))
    request = PlanRequest(peak_rps=10, surge_ratio=surge, rule="published")
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


def test_the_levels_are_held_as_a_ladder_with_the_ladders_timing() -> None:
    ladder = LadderSchedule(rungs=(1, 5), hold_s=20, measure_s=10, idle_s=5)
    held = verification_ladder(ladder, verification_levels(8))  # 6 and 4 users
    assert held == LadderSchedule(rungs=(4, 6), hold_s=20, measure_s=10, idle_s=5)
    # At Q_max 1 both thresholds round to one user: one rung holds both.
    assert verification_ladder(ladder, verification_levels(1)).rungs == (1,)


def test_the_dry_run_says_where_the_rungs_will_sit_and_what_they_cost() -> None:
    ladder = LadderSchedule(rungs=(1, 5), hold_s=20, measure_s=10, idle_s=5)
    line = describe_verification(ladder, 1.25)
    assert "C_scale_max = 0.75 x Q_max" in line and "C_scale_min = 0.5 x Q_max" in line
    # Three rungs at most (two thresholds and the fleet level), each then held three minutes.
    assert line.endswith(
        "each held 20 s unless a ladder rung held those users already, and one at the fleet "
        "rule's level held 180 s so that 2 whole minutes of InvocationsPerInstance are read "
        "(with it, every held rung is): at most 9 min 15 s more"
    )
    with pytest.raises(VerificationError, match=r"--plan-surge-ratio 1\.6"):
        describe_verification(ladder, 1.6)


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


def test_held_rungs_become_verification_rungs_the_plan_uses() -> None:
    levels = verification_levels(50)  # 38 and 25 users
    held = serial_ladder((25, 38), service_ms=55)
    readings = [{LADDER_RATIO_STAT: None}, {LADDER_RATIO_STAT: 34.2}]
    rungs = verification_rungs(levels, 1.25, held, readings)
    # CloudWatch gave nothing at 25 users: that point is left out, never read as 1.0.
    assert [(v.role, v.concurrency) for v in rungs] == [("scale_out", 38)]
    (rung,) = rungs
    assert rung.cloudwatch_ratios["Maximum/10s"] == pytest.approx(
        34.2 / held[1].client_mean_in_flight
    )
    # A level the run never reached (it stopped after a failing rung) is no point either.
    assert verification_rungs(levels, 1.25, held[:1], readings[:1]) == []
    # Into a SageMaker ladder with no per-rung ratio: the target is measured where it sits.
    fp = qmax_artifact(serial_ladder()).fingerprint.model_copy(
        update={"transport": Transport.RESPONSE_STREAM}
    )  # type: ignore[union-attr]
    qmax = qmax_artifact(
        serial_ladder((1, 5, 10, 20, 30, 40, 50, 60), service_ms=55), fingerprint=fp
    )
    qmax = qmax.model_copy(update={"verification": [rung]})
    plan = derive_plan(
        qmax,
        ttotal_artifact(fingerprint=fp),
        PlanRequest(peak_rps=10, surge_trials=1, rule="published"),
        SOURCES,
    )
    assert plan.target_units.ratio_rule == "verification-rung"
    assert plan.scale_in_units.ratio_rule == "nearest-rung"  # only the point at 38 was measured


def _timed(rungs: list, start_epoch: float):  # type: ignore[no-untyped-def]
    ladder = LadderSettings(
        rungs=[r.concurrency for r in rungs], hold_s=30, measure_s=20, idle_s=0,
        start_epoch=start_epoch,
    )  # fmt: skip
    return qmax_artifact(rungs).model_copy(update={"ladder": ladder})


def _points_in(artifact, index: int, value: float) -> list[MetricPoint]:  # type: ignore[no-untyped-def]
    w0, _ = artifact.ladder.measure_window(index)
    return [MetricPoint(w0, value), MetricPoint(w0 + 10, value)]


def test_a_level_a_ladder_rung_held_is_read_from_that_rung_not_held_again() -> None:
    levels = verification_levels(4)  # scale-out 3 users, scale-in 2 users
    ladder_run = _timed(serial_ladder((1, 2, 4), service_ms=500), start_epoch=1000.0)
    reused = held_by_the_ladder(levels, ladder_run.rungs)
    assert reused == {2: 1}  # c=2 is the ladder's second rung; 3 users were never held
    # Only the level no rung held is left to hold.
    to_hold = [level for level in levels if level.users not in reused]
    assert verification_ladder(
        LadderSchedule(rungs=(1,), hold_s=30, measure_s=20), to_hold
    ).rungs == (3,)
    held_run = _timed(serial_ladder((3,), service_ms=500), start_epoch=2000.0)
    points = _points_in(ladder_run, 1, 1.8) + _points_in(held_run, 0, 2.7)
    points += _points_in(ladder_run, 2, 99.0)  # another rung's load never leaks in
    rungs = held_rungs(HeldVerification(levels, 1.25, held_run, reused), points, ladder_run)
    assert [(v.role, v.concurrency, v.source) for v in rungs] == [
        ("scale_out", 3, "held"),
        ("scale_in", 2, "ladder-rung"),
    ]
    out, in_ = rungs
    assert out.cloudwatch_ratios["Maximum/10s"] == pytest.approx(
        2.7 / held_run.rungs[0].client_mean_in_flight
    )
    assert in_.cloudwatch_ratios["Maximum/10s"] == pytest.approx(
        1.8 / ladder_run.rungs[1].client_mean_in_flight
    )
    # Both levels on ladder rungs: no run of its own at all.
    both = verification_levels(2)  # 2 and 1 users
    assert held_by_the_ladder(both, ladder_run.rungs) == {2: 1, 1: 0}


def test_an_unusable_ladder_rung_is_held_again() -> None:
    from tests.core.ladders import rung

    rungs = [rung(1, 2.0, 500), rung(2, 2.0, 1000, usable=False), rung(4, 2.0, 2000)]
    assert held_by_the_ladder(verification_levels(4), rungs) == {}
