"""The one statement of AWS's scaling rules (`planning.aws.scaling`), pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.planning.aws import scaling as aws

HIGH_RES = aws.HIGH_RESOLUTION_TRACKING
INVOCATIONS = aws.INVOCATIONS_TRACKING


def _alarm(**kw: object) -> aws.AlarmRule:
    base = dict(
        name="a", metric="ConcurrentRequestsPerModel", statistic="Average", period_s=60,
        evaluation_periods=3, datapoints_to_alarm=3, threshold=25.0,
        comparison="LessThanOrEqualToThreshold", treat_missing="breaching",
    )  # fmt: skip
    base.update(kw)
    return aws.AlarmRule(**base)  # type: ignore[arg-type]


def _tracking(metric: str = HIGH_RES, target: float = 37.5, disable: bool = True, **kw: float):
    high, low = aws.tracking_alarms(metric, target, disable, ("t-high", "t-low"))
    cooldowns = {"scale_out_cooldown_s": 30.0, "scale_in_cooldown_s": 300.0, **kw}
    return aws.TrackingRule(
        "t", metric, target, cooldowns["scale_out_cooldown_s"], cooldowns["scale_in_cooldown_s"],
        disable, high, low,
    )  # fmt: skip


SCALE_IN = aws.StepRule(
    "s", "ChangeInCapacity", (aws.Step(None, 0.0, -1),), 960, _alarm(name="s-alarm")
)


def alarm_in(state: aws.AlarmState, value: float) -> aws.AlarmReading:
    return aws.AlarmReading(state, value)


ALARM = aws.AlarmState.ALARM


def test_datapoints_group_windows_into_aligned_periods() -> None:
    windows = [aws.Datapoint(t, float(t)) for t in range(0, 180, 10)]
    assert aws.period_datapoints(windows, 60, "Average", 3, 185) == [25.0, 85.0, 145.0]
    assert aws.period_datapoints(windows, 60, "Maximum", 2, 185) == [110.0, 170.0]
    assert aws.period_datapoints(windows, 60, "Sum", 1, 185) == [sum(range(120, 180, 10))]
    assert aws.period_datapoints(windows, 60, "Average", 4, 185)[0] is None


@pytest.mark.parametrize(
    ("points", "treat", "expected"),
    [
        ([1.0, 2.0, 3.0], "breaching", aws.AlarmState.ALARM),
        ([1.0, 30.0, 3.0], "breaching", aws.AlarmState.OK),
        ([None, None, None], "breaching", aws.AlarmState.ALARM),
        ([None, None, None], "notBreaching", aws.AlarmState.OK),
        ([None, None, None], "missing", aws.AlarmState.INSUFFICIENT_DATA),
        ([None, 1.0, 1.0], "ignore", aws.AlarmState.OK),  # 2 of the needed 3
    ],
)
def test_alarm_state(points: list, treat: str, expected: aws.AlarmState) -> None:
    assert aws.alarm_state(_alarm(treat_missing=treat), points) == expected


def test_the_high_resolution_high_alarm_is_three_ten_second_maxima_above_target() -> None:
    high, low = aws.tracking_alarms(HIGH_RES, 37.5, True)
    assert (high.period_s, high.evaluation_periods, high.statistic) == (10, 3, "Maximum")
    assert low is None
    assert aws.alarm_state(high, [38.0, 40.0, 39.0]) == aws.AlarmState.ALARM
    assert aws.alarm_state(high, [38.0, 37.5, 39.0]) == aws.AlarmState.OK


def test_the_invocations_alarms_are_minute_sums_published_a_minute_late() -> None:
    high, low = aws.tracking_alarms(INVOCATIONS, 600.0, False)
    assert (high.metric, high.statistic, high.period_s, high.evaluation_periods) == (
        "InvocationsPerInstance", "Sum", 60, 3,
    )  # fmt: skip
    assert low is not None and (low.period_s, low.evaluation_periods) == (60, 15)
    assert low.threshold == pytest.approx(540.0) and low.comparison == "LessThanThreshold"
    assert high.delay_s == 60 and aws.tracking_alarms(HIGH_RES, 1.0, True)[0].delay_s == 0
    # Windows of 10 s summed into minutes; at t = 240 s only the minutes up to 180 s are in.
    windows = [aws.Datapoint(t, 120.0) for t in range(0, 240, 10)]
    reading = aws.read_alarm(high, windows, 240.0)
    assert reading.points == (720.0, 720.0, 720.0) and reading.state is ALARM


def test_an_alarm_is_evaluated_once_a_period() -> None:
    high, _ = aws.tracking_alarms(INVOCATIONS, 1.0, False)
    assert [t for t in range(10, 200, 10) if aws.due(high, t)] == [60, 120, 180]


@given(st.integers(1, 50), st.floats(0.01, 500), st.floats(1, 100))
def test_tracking_capacity_brings_the_metric_to_the_target(
    desired: int, value: float, target: float
) -> None:
    capacity = aws.tracking_capacity(desired, value, target)
    assert capacity >= 1
    assert desired * value / capacity <= target * (1 + 1e-9) or (capacity == 1 and value <= target)


def test_step_scale_in_removes_one_at_or_below_the_threshold() -> None:
    assert aws.step_capacity(SCALE_IN, 3, -5.0) == 2
    assert aws.step_capacity(SCALE_IN, 3, 0.0) == 2
    assert aws.step_capacity(SCALE_IN, 3, 1.0) is None


@pytest.mark.parametrize(
    ("percent", "base", "minimum", "expected"),
    [(50, 3, None, 4), (32, 100, None, 132), (32, 2, None, 3), (10, 4, 2, 6), (-10, 5, None, 4)],
)
def test_percent_change_rounds_as_aws_documents(percent, base, minimum, expected) -> None:
    rule = aws.StepRule("p", "PercentChangeInCapacity", (aws.Step(None, None, percent),), 0,
                        _alarm(), minimum)  # fmt: skip
    assert aws.step_capacity(rule, base, 1.0) == expected


def test_exact_capacity() -> None:
    exact = aws.StepRule("e", "ExactCapacity", (aws.Step(0.0, None, 4),), 0, _alarm())
    assert aws.step_capacity(exact, 1, 3.0) == 4


@given(st.integers(-100, 100), st.integers(1, 10), st.integers(10, 20))
def test_clamp_stays_in_bounds(capacity: int, low: int, high: int) -> None:
    assert low <= aws.clamp(capacity, low, high) <= high


# --------------------------------------------------------------------------- the engine


def test_target_tracking_sizes_from_the_desired_count() -> None:
    engine = aws.ScalingEngine((_tracking(),))
    action = engine.decide(0.0, {"t-high": alarm_in(ALARM, 50.0)}, 6, (1, 100))
    assert action is not None and (action.before, action.after) == (6, 8)


def test_within_the_scale_out_cooldown_the_added_capacity_counts_once() -> None:
    engine = aws.ScalingEngine((_tracking(scale_out_cooldown_s=300.0),))
    engine.decide(0.0, {"t-high": alarm_in(ALARM, 50.0)}, 6, (1, 100))  # 6 → 8
    # The metric still reads the 6 that serve: sized from 6 again, nothing more to add.
    assert engine.decide(60.0, {"t-high": alarm_in(ALARM, 50.0)}, 8, (1, 100)) is None
    # A larger scale-out within the cooldown acts, still sized from the 6 it started from.
    larger = engine.decide(120.0, {"t-high": alarm_in(ALARM, 75.0)}, 8, (1, 100))
    assert larger is not None and larger.after == 12
    # After the cooldown a breach sizes from the desired count again.
    after = engine.decide(400.0, {"t-high": alarm_in(ALARM, 75.0)}, 12, (1, 100))
    assert after is not None and after.after == 24


def test_scale_in_waits_for_its_own_cooldown_only() -> None:
    """[AAS-tt-api, AAS-step-api]: scale-in is blocked by its own cooldown; no rule lets a
    running scale-out cooldown block it (the module before issue 35 did)."""
    tracking = _tracking(scale_out_cooldown_s=100.0)
    engine = aws.ScalingEngine((tracking, SCALE_IN))
    low = {"s-alarm": alarm_in(ALARM, 10.0)}
    engine.decide(0.0, {"t-high": alarm_in(ALARM, 50.0)}, 6, (1, 100))
    first = engine.decide(50.0, low, 8, (1, 100))  # the scale-out cooldown still runs
    assert first is not None and first.after == 7
    assert engine.decide(500.0, low, 7, (1, 100)) is None  # its own 960 s cooldown
    assert engine.decide(1200.0, low, 7, (1, 100)) is not None


def test_a_scale_out_acts_during_a_scale_in_cooldown() -> None:
    engine = aws.ScalingEngine((_tracking(), SCALE_IN))
    assert engine.decide(0.0, {"s-alarm": alarm_in(ALARM, 10.0)}, 8, (1, 100)) is not None
    out = engine.decide(10.0, {"t-high": alarm_in(ALARM, 75.0)}, 7, (1, 100))
    assert out is not None and out.after == 14


def test_target_tracking_scales_in_proportionally_never_above_the_target() -> None:
    engine = aws.ScalingEngine((_tracking(INVOCATIONS, 600.0, disable=False),))
    action = engine.decide(0.0, {"t-low": alarm_in(ALARM, 300.0)}, 10, (1, 100))
    assert action is not None and action.after == 5


def test_a_scale_out_wins_over_a_scale_in_and_bounds_and_suspension_hold() -> None:
    engine = aws.ScalingEngine((_tracking(), SCALE_IN))
    both = {"t-high": alarm_in(ALARM, 50.0), "s-alarm": alarm_in(ALARM, 10.0)}
    action = engine.decide(0.0, both, 6, (1, 7))
    assert action is not None and action.after == 7  # clamped to max
    assert aws.ScalingEngine((_tracking(),)).decide(
        0.0, {"t-high": alarm_in(ALARM, 50.0)}, 6, (1, 100), suspended=(True, False)
    ) is None  # fmt: skip


def test_a_percent_burst_sizes_from_the_capacity_its_cooldown_started_from() -> None:
    burst = aws.StepRule(
        "b", "PercentChangeInCapacity", (aws.Step(0.0, None, 50),), 300,
        _alarm(name="b-alarm", comparison="GreaterThanOrEqualToThreshold", threshold=10.0), 1,
    )  # fmt: skip
    engine = aws.ScalingEngine((burst,))
    fired = {"b-alarm": alarm_in(ALARM, 20.0)}
    assert engine.decide(0.0, fired, 10, (1, 100)).after == 15  # type: ignore[union-attr]
    assert engine.decide(10.0, fired, 15, (1, 100)) is None
    assert engine.decide(310.0, fired, 15, (1, 100)).after == 22  # type: ignore[union-attr]


# ------------------------------------------------------------ AWS as documented (issue 35)


def test_an_alarm_that_stays_in_alarm_acts_once_a_minute_not_every_evaluation() -> None:
    """[CW-actions]: an Auto Scaling action is invoked on the transition into ALARM and then
    "once per minute that the alarm remains in the new state"; a 10 s alarm evaluated every
    10 s does not act every 10 s."""
    engine = aws.ScalingEngine((_tracking(scale_out_cooldown_s=0.0),))
    acted = []
    desired = 6
    for t in range(0, 130, 10):
        action = engine.decide(float(t), {"t-high": alarm_in(ALARM, 75.0)}, desired, (1, 1000))
        if action is not None:
            acted.append(t)
            desired = action.after
    assert acted == [0, 60, 120]


def test_an_alarm_that_leaves_and_reenters_alarm_acts_on_the_new_transition() -> None:
    """[CW-actions]: actions happen on state transitions; re-entering ALARM is one."""
    engine = aws.ScalingEngine((_tracking(scale_out_cooldown_s=0.0),))
    assert engine.decide(0.0, {"t-high": alarm_in(ALARM, 75.0)}, 6, (1, 100)) is not None
    assert engine.decide(10.0, {"t-high": alarm_in(aws.AlarmState.OK, 30.0)}, 12, (1, 100)) is None
    again = engine.decide(20.0, {"t-high": alarm_in(ALARM, 75.0)}, 12, (1, 100))
    assert again is not None and again.after == 24


def test_a_scale_out_ends_a_running_scale_in_cooldown() -> None:
    """[AAS-step-api, AAS-tt-api]: a scale-out during a scale-in cooldown acts at once, "the
    cooldown period for the scale-in activity stops and doesn't complete"."""
    engine = aws.ScalingEngine((_tracking(), SCALE_IN))
    low = {"s-alarm": alarm_in(ALARM, 10.0)}
    assert engine.decide(0.0, low, 8, (1, 100)) is not None  # 8 → 7; its 960 s cooldown runs
    assert engine.decide(10.0, {"t-high": alarm_in(ALARM, 75.0)}, 7, (1, 100)) is not None
    # The scale-in cooldown stopped: the next scale-in need not wait out the 960 s.
    assert engine.decide(120.0, low, 14, (1, 100)) is not None


def _second_tracking(disable: bool = False) -> aws.TrackingRule:
    high, low = aws.tracking_alarms(INVOCATIONS, 600.0, disable, ("u-high", "u-low"))
    return aws.TrackingRule("u", INVOCATIONS, 600.0, 0.0, 0.0, disable, high, low)


def test_target_tracking_scales_in_only_when_every_tracking_policy_is_ready() -> None:
    """[AAS-tt, multiple policies]: Application Auto Scaling "will scale in only if all of the
    target tracking policies (with the scale-in portion enabled) are ready to scale in"."""
    t = _tracking(INVOCATIONS, 600.0, disable=False, scale_in_cooldown_s=0.0)
    engine = aws.ScalingEngine((t, _second_tracking()))
    ok = aws.AlarmState.OK
    wants_in = {"t-low": alarm_in(ALARM, 300.0), "u-low": alarm_in(ok, 700.0)}
    assert engine.decide(0.0, wants_in, 10, (1, 100)) is None  # u is not ready
    both = {"t-low": alarm_in(ALARM, 300.0), "u-low": alarm_in(ALARM, 450.0)}
    action = engine.decide(60.0, both, 10, (1, 100))
    assert action is not None and action.after == 8  # the larger of 5 and 8
    # A policy whose scale-in is disabled has no say.
    alone = aws.ScalingEngine((t, _second_tracking(disable=True)))
    assert alone.decide(0.0, {"t-low": alarm_in(ALARM, 300.0)}, 10, (1, 100)) is not None


def test_a_step_scale_in_is_not_held_back_by_target_tracking() -> None:
    """[AAS-tt, multiple policies]: the all-ready rule is target tracking's; a step policy's
    scale-in acts on its own alarm while a tracking policy is not ready to scale in."""
    t = _tracking(INVOCATIONS, 600.0, disable=False)
    engine = aws.ScalingEngine((t, SCALE_IN))
    readings = {"t-low": alarm_in(aws.AlarmState.OK, 700.0), "s-alarm": alarm_in(ALARM, 10.0)}
    action = engine.decide(0.0, readings, 10, (1, 100))
    assert action is not None and (action.policy, action.after) == ("s", 9)


def test_a_step_policy_aggregates_its_datapoints_average_by_default() -> None:
    """[AAS-step-api]: MetricAggregationType, "If the aggregation type is null, the value is
    treated as Average": the step is picked from the aggregate of the alarm's datapoints, not
    from the newest one."""
    steps = (aws.Step(0.0, 10.0, 1), aws.Step(10.0, None, 5))
    alarm = _alarm(name="x", comparison="GreaterThanThreshold", threshold=10.0)
    # The newest datapoint (25) is 15 over: +5; their Average (16) only 6 over: +1.
    reading = {"x": aws.AlarmReading(ALARM, 25.0, (11.0, 12.0, 25.0))}

    def after(aggregation: str | None) -> int:
        extra = () if aggregation is None else (None, aggregation)
        rule = aws.StepRule("x", "ChangeInCapacity", steps, 0, alarm, *extra)  # type: ignore[arg-type]
        action = aws.ScalingEngine((rule,)).decide(0.0, reading, 4, (1, 100))
        assert action is not None
        return action.after

    assert after(None) == 5  # Average, AWS's default
    assert after("Minimum") == 5
    assert after("Maximum") == 9


def test_a_refused_action_starts_no_cooldown_and_acts_again_at_the_next_invocation() -> None:
    """[SM-update]: a capacity change while the endpoint is Updating is refused; Application
    Auto Scaling records a failed activity and acts again on a later invocation, which the
    refused attempt's cooldown must not hold back."""
    engine = aws.ScalingEngine((_tracking(scale_out_cooldown_s=300.0),))
    fired = {"t-high": alarm_in(ALARM, 75.0)}
    first = engine.decide(0.0, fired, 6, (1, 100))
    assert first is not None
    engine.refused(first)
    assert engine.decide(10.0, fired, 6, (1, 100)) is None  # not invoked again within the minute
    again = engine.decide(60.0, fired, 6, (1, 100))
    assert again is not None and (again.before, again.after) == (6, 12)


def test_the_variant_sets_build_target_trackings_alarms_by_their_reading() -> None:
    from tts_bench.planning.aws.semantics import DOCUMENTED, PESSIMISTIC

    high, _ = aws.tracking_alarms(HIGH_RES, 37.5, True, semantics=DOCUMENTED)
    assert (high.period_s, high.detection_s) == (10, 30)
    high, _ = aws.tracking_alarms(HIGH_RES, 37.5, True, semantics=PESSIMISTIC)
    assert (high.period_s, high.delay_s, high.detection_s) == (60, 120, 300)
    high, low = aws.tracking_alarms(INVOCATIONS, 600.0, False, semantics=PESSIMISTIC)
    assert low is not None and (low.datapoints_to_alarm, low.delay_s) == (3, 120)
    assert (high.delay_s, high.detection_s) == (120, 300)
    high, low = aws.tracking_alarms(INVOCATIONS, 600.0, False)  # documented: what plans assume
    assert low is not None and (low.datapoints_to_alarm, high.detection_s) == (15, 240)


def test_a_scale_out_sized_from_its_cooldowns_base_never_becomes_a_scale_in() -> None:
    """[AAS-step-api] Within its cooldown a scale-out step "won't increase the desired capacity
    again unless a larger scale out is triggered": sized from the capacity it started from, it
    may ask for less than the desired count another policy set, and then it does nothing."""
    burst = aws.StepRule(
        "b", "PercentChangeInCapacity", (aws.Step(0.0, None, 30),), 500,
        _alarm(name="b-alarm", comparison="GreaterThanOrEqualToThreshold", threshold=3.6), 3,
    )  # fmt: skip
    engine = aws.ScalingEngine((burst, _tracking(INVOCATIONS, 600.0, disable=False)))
    fired = {"b-alarm": alarm_in(ALARM, 8.0)}
    assert engine.decide(0.0, fired, 1, (1, 100)).after == 4  # type: ignore[union-attr]
    tracked = engine.decide(60.0, {"t-high": alarm_in(ALARM, 1350.0)}, 4, (1, 100))
    assert tracked is not None and tracked.after == 9
    assert engine.decide(120.0, fired, 9, (1, 100)) is None  # not 9 → 4
