"""Verification rungs: the levels the plan will use, the ladder of their own they are held as,
and the `VerificationRung` built from a held rung and CloudWatch's readings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.ladders import SOURCES, qmax_artifact, serial_ladder, ttotal_artifact
from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT, LADDER_RATIO_STAT, CloudWatchStat
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.rungs import LadderSettings
from tts_bench.measure.ladder.live.cloudwatch_join import (
    MIN_INVOCATION_MINUTES,
    MetricPoint,
    whole_minutes,
)
from tts_bench.measure.ladder.live.live_ladder import HeldVerification, held_rungs
from tts_bench.measure.ladder.live.verification import (
    FLEET_HOLD_S,
    VerificationError,
    all_levels,
    cloudwatch_ratios,
    describe_verification,
    fleet_level,
    held_by_the_ladder,
    verification_ladder,
    verification_levels,
    verification_rungs,
)
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.planning.fleet_rule import invocations_units
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
    # Three rungs at most: two thresholds at the ladder's hold, the fleet level three minutes.
    assert line.endswith(
        "each held 20 s unless a ladder rung held those users already, and one at the fleet "
        "rule's level held until 2 whole minutes of InvocationsPerInstance are read, at most "
        "180 s: at most 3 min 55 s more"
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


# --------------------------------------------------------------------------- the fleet level


@settings(max_examples=200, deadline=None)
@given(st.floats(1e9, 2e9, allow_nan=False))
def test_three_minutes_hold_two_whole_minutes_in_any_phase(start: float) -> None:
    assert whole_minutes(start, start + FLEET_HOLD_S) >= MIN_INVOCATION_MINUTES
    # Shorter holds do not, in some phase: the minute boundary just after the start.
    late = (start // 60) * 60 + 0.5
    assert whole_minutes(late, late + FLEET_HOLD_S - 1) < MIN_INVOCATION_MINUTES


@settings(max_examples=300, deadline=None)
@given(st.floats(1e9, 2e9, allow_nan=False), st.sampled_from([1.0, 30.0]))
def test_the_fleet_rung_fitted_at_its_start_holds_two_whole_minutes_and_no_more_than_three(
    start: float, scale: float
) -> None:
    from tts_bench.aws.clock import ServiceClock
    from tts_bench.measure.ladder.live.verification import VerificationLevel

    clock = ServiceClock(scale=scale, origin_s=1.5e9)
    levels = (VerificationLevel("fleet", 1.2, 1), VerificationLevel("scale_out", 2.2, 2))
    ladder = LadderSchedule(rungs=(1, 3), hold_s=20, measure_s=12, idle_s=0)
    planned = verification_ladder(ladder, levels, clock.wall_seconds(FLEET_HOLD_S))
    fitted = planned.fitted_to_minutes(0, start, clock)
    hold = fitted.rung_hold_s(0)
    assert hold <= planned.rung_hold_s(0) + 1e-9
    v0, v1 = clock.to_virtual(start), clock.to_virtual(start + hold)
    assert whole_minutes(v0, v1) >= MIN_INVOCATION_MINUTES
    # Two minutes and what is left of the one it starts in, a margin past them at most (and
    # never below the ladder's own hold: on a compressed clock two minutes can be shorter).
    needed = clock.wall_seconds(MIN_INVOCATION_MINUTES * 60 + (-v0) % 60) + 2.0
    assert hold <= max(20.0, needed) + 1e-6
    assert fitted.rung_hold_s(1) == 20  # the other level as planned
    assert fitted.fitted_to_minutes(1, start + hold, clock) == fitted


def test_a_fleet_rung_starting_just_before_a_minute_holds_about_two() -> None:
    from tts_bench.aws.clock import ServiceClock
    from tts_bench.measure.ladder.live.verification import VerificationLevel

    planned = verification_ladder(
        LadderSchedule(rungs=(1,), hold_s=20, measure_s=12), (VerificationLevel("fleet", 1, 1),)
    )
    boundary = 1_800_000_000.0  # a whole minute
    assert planned.fitted_to_minutes(0, boundary - 1, ServiceClock()).rung_hold_s(0) == 123
    assert planned.fitted_to_minutes(0, boundary + 0.5, ServiceClock()).rung_hold_s(0) == 180


def test_the_fleet_level_is_the_fleet_plans_c_scale_max_on_a_flat_day() -> None:
    """On a flat day the plan's margin is its floor, the one the level assumes."""
    rungs = serial_ladder((1, 2, 4, 8), service_ms=500, slo_ms=3500)
    qmax = qmax_artifact(rungs, slo_ms=3500)
    level = fleet_level(qmax.curve_rungs, qmax.q_max or 0, 1.25)
    request = PlanRequest(peak_rps=10, trough_rps=10, surge_ratio=1.25, slo_ms=3500)
    plan = derive_plan(qmax, ttotal_artifact(), request, SOURCES)
    assert plan.rule == "fleet" and level.role == "fleet"
    assert level.at == plan.c_scale_max
    assert level.users == max(1, round(level.at))


def _fleet_run(hold_s: float, start_epoch: float):  # type: ignore[no-untyped-def]
    """The main job's shape: a ladder of 30 s rungs, then the held run at the fleet level."""
    from tests.ladder.synthetic import closed_loop
    from tts_bench.measure.ladder.statistics import ladder_rungs
    from tts_bench.measure.samples import Sample

    ladder_run = _main_job_ladder()
    levels = all_levels(ladder_run.curve_rungs, ladder_run.q_max or 0, 1.25)
    reused = held_by_the_ladder(levels, ladder_run.rungs, ladder_run.ladder)
    to_hold = tuple(level for level in levels if level.users not in reused)
    schedule = verification_ladder(
        LadderSchedule(rungs=(1, 2, 4), hold_s=30, measure_s=20, idle_s=2), to_hold, hold_s
    )
    samples: list[Sample] = []
    for i, users in enumerate(schedule.rungs):
        phase = schedule.rung_phase(i)
        samples += closed_loop(
            users, start_epoch + phase.start_s, start_epoch + phase.end_s, 2000.0 * users
        )
    held = ladder_rungs(samples, [], schedule, start_epoch, 9000.0, math.inf)
    held_run = qmax_artifact(held, slo_ms=9000).model_copy(
        update={"ladder": schedule.settings(start_epoch)}
    )
    end = start_epoch + schedule.duration_s
    minutes = [
        MetricPoint(float(m), float(sum(1 for s in samples if m <= s.start < m + 60)))
        for m in range(math.ceil(start_epoch / 60) * 60, int(end) - 59, 60)
    ]
    points = [
        MetricPoint(float(t), float(u))
        for i, u in enumerate(schedule.rungs)
        for t in range(
            math.ceil((start_epoch + schedule.rung_phase(i).start_s) / 10) * 10,
            int(start_epoch + schedule.rung_phase(i).end_s) - 9,
            10,
        )
    ]
    verification = held_rungs(
        HeldVerification(levels, 1.25, held_run, reused), points, ladder_run, minutes, samples
    )
    return ladder_run, levels, reused, schedule, verification


@pytest.mark.parametrize("start_epoch", [2000.0, 2045.5, 2099.0])
def test_the_fleet_level_is_held_and_its_invocations_measured(start_epoch: float) -> None:
    ladder_run, levels, reused, schedule, verification = _fleet_run(FLEET_HOLD_S, start_epoch)
    fleet = levels[-1]
    assert fleet.role == "fleet" and fleet.users not in reused  # 30 s rungs hold no minute
    # Only the fleet level's rung is held for its minutes; the others keep the ladder's hold.
    index = schedule.rungs.index(fleet.users)
    assert schedule.rung_hold_s(index) == FLEET_HOLD_S
    others = [i for i in range(len(schedule.rungs)) if i != index]
    assert others and all(schedule.rung_hold_s(i) == schedule.hold_s < FLEET_HOLD_S for i in others)
    (rung,) = [v for v in verification if v.role == "fleet"]
    # Every request the client sent in those minutes, counted once: the ratio is 1.
    assert rung.cloudwatch_ratios[INVOCATIONS_RATIO_STAT.key] == 1.0
    assert "Maximum/10s" in rung.cloudwatch_ratios
    # The published levels carry no invocations ratio: only the fleet level is held for it.
    assert all(INVOCATIONS_RATIO_STAT.key not in v.cloudwatch_ratios for v in verification[:-1])
    # The plan reads it: the target's ratio is measured, and cw_ratio says so.
    qmax = _sagemaker(ladder_run).model_copy(update={"verification": verification})
    units, _ = invocations_units(qmax)
    assert (units.ratio_rule, units.cw_ratio) == ("smallest-rung", 1.0)


def test_a_fleet_level_held_too_short_keeps_the_warning() -> None:
    ladder_run, levels, _, schedule, verification = _fleet_run(100.0, 2045.5)
    assert schedule.rung_hold_s(schedule.rungs.index(levels[-1].users)) == 100.0
    assert all(INVOCATIONS_RATIO_STAT.key not in v.cloudwatch_ratios for v in verification)
    qmax = _sagemaker(ladder_run).model_copy(update={"verification": verification})
    assert invocations_units(qmax)[0].ratio_rule == "unmeasured"
    plan = derive_plan(
        qmax, ttotal_artifact(fingerprint=qmax.fingerprint),
        PlanRequest(peak_rps=1, trough_rps=0.2, slo_ms=9000), SOURCES,
    )  # fmt: skip
    (finding,) = [f for f in plan.findings if f.name == "cw_ratio"]
    assert finding.verdict.value == "warn" and "two whole minutes" in finding.message


def test_a_ladder_rung_that_held_two_whole_minutes_is_read_for_the_fleet_level() -> None:
    ladder_run = _main_job_ladder()
    long = ladder_run.ladder.model_copy(update={"hold_s": 240.0, "measure_s": 60.0})  # type: ignore[union-attr]
    levels = all_levels(ladder_run.curve_rungs, ladder_run.q_max or 0, 1.25)
    fleet = levels[-1]
    assert fleet.users in held_by_the_ladder(levels, ladder_run.rungs, long)
    assert fleet.users not in held_by_the_ladder(levels, ladder_run.rungs, ladder_run.ladder)


def _main_job_ladder():  # type: ignore[no-untyped-def]
    """Rungs 1, 2, 4 held 30 s on a serial engine at 2 s a request; c=4 fails a 9 s SLO."""
    rungs = serial_ladder((1, 2, 4), service_ms=2000, slo_ms=9000)
    ladder = LadderSettings(rungs=[1, 2, 4], hold_s=30, measure_s=20, idle_s=2, start_epoch=1000.0)
    return qmax_artifact(rungs, slo_ms=9000).model_copy(update={"ladder": ladder})


def _sagemaker(qmax):  # type: ignore[no-untyped-def]
    fp = qmax.fingerprint.model_copy(update={"transport": Transport.RESPONSE_STREAM})
    return qmax.model_copy(update={"fingerprint": fp})


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_the_join_reads_a_hold_on_the_clock_cloudwatch_stamped_it_on(scale: float) -> None:
    """On a local cloud compressed K-fold CloudWatch stamps its points on the cloud's clock: the
    fleet level's three minutes there are 180/K wall seconds of the ladder's. The join maps the
    rung's wall-clock hold and each request's start onto that clock (recorded in the ladder's
    settings); a ladder that did not record it lines up with none of the points."""
    from tests.ladder.synthetic import closed_loop
    from tts_bench.measure.ladder.live.cloudwatch_join import (
        cloud_window,
        invocations_ratio,
        ladder_clock,
        rung_mean,
    )

    origin, start, users = 1.5e9, 1.5e9 + 1000.0, 3
    hold = FLEET_HOLD_S / scale
    samples = closed_loop(users, start, start + hold, 200.0 * users / scale)
    recorded = LadderSettings(
        rungs=[users], hold_s=hold, measure_s=hold / 2, idle_s=0, start_epoch=start,
        time_scale=scale, time_origin_s=origin,
    )  # fmt: skip
    v0, v1 = cloud_window(recorded, 0, whole_hold=True)
    assert (v0, v1) == (origin + scale * 1000, origin + scale * 1000 + FLEET_HOLD_S)
    cloud_starts = [ladder_clock(recorded).to_virtual(s.start) for s in samples]
    minutes = [
        MetricPoint(float(m), float(sum(1 for t in cloud_starts if m <= t < m + 60)))
        for m in range(math.ceil(v0 / 60) * 60, int(v1) - 59, 60)
    ]
    points = [
        MetricPoint(float(t), float(users)) for t in range(math.ceil(v0 / 10) * 10, int(v1) - 9, 10)
    ]
    assert len(minutes) >= MIN_INVOCATION_MINUTES
    assert invocations_ratio(minutes, samples, recorded, 0) == 1.0
    assert rung_mean(points, recorded, 0) == users
    if scale != 1.0:  # the wall clock alone: the cloud's points lie far outside every window
        unmapped = recorded.model_copy(update={"time_scale": 1.0, "time_origin_s": 0.0})
        assert invocations_ratio(minutes, samples, unmapped, 0) is None
        assert rung_mean(points, unmapped, 0) is None
