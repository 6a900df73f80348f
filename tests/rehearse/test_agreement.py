"""The agreement rules of a rehearsal and its replay (pure)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.rehearse.agreement import (
    Action,
    Steps,
    alarm_episodes,
    band_passed,
    desired_agreement,
    detection_lags,
    exchangeable,
    replay_band,
    scaled_out_before_shedding,
    shed_range,
    shed_spread,
    within_band,
)


def alarm(period_s: int, datapoints: int, statistic: str = "Sum") -> aws_scaling.AlarmRule:
    return aws_scaling.AlarmRule(
        "a",
        "m",
        statistic,
        period_s,
        datapoints,
        datapoints,
        100.0,
        "GreaterThanThreshold",
        "missing",
    )


@given(
    period=st.sampled_from([10, 60]),
    datapoints=st.integers(1, 5),
    crossing_period=st.integers(0, 20),
)
def test_a_crossing_at_a_period_start_is_detected_after_the_alarms_own_detection_time(
    period: int, datapoints: int, crossing_period: int
) -> None:
    """Episodes are read with `aws_scaling.read_alarm`: the lag of an action at the evaluation
    that put the alarm in ALARM is datapoints × period + publication delay."""
    rule = alarm(period, datapoints)
    crossed = crossing_period * period
    until = crossed + rule.detection_s + 3 * period
    windows = [
        aws_scaling.Datapoint(float(t), 0.0 if t < crossed else 500.0)
        for t in range(0, int(until), 10)
    ]
    episodes = alarm_episodes(rule, windows, until)
    assert episodes == [(crossed + rule.detection_s, crossed)]
    acted = crossed + rule.detection_s + 5.0  # a read delay later, as the local cloud acts
    lags = detection_lags(
        [Action(acted, 1, 2, "a"), Action(acted + period, 2, 3, "a")],
        {"a": rule},
        {"a": windows},
        until,
    )
    assert lags == [rule.detection_s + 5.0, None]  # the second is a repeat of the episode


def test_scale_ins_and_unknown_alarms_have_no_lag() -> None:
    rule = alarm(60, 3)
    lags = detection_lags(
        [Action(400, 3, 2, "a"), Action(400, 1, 2, None), Action(400, 1, 2, "b")],
        {"a": rule},
        {"a": []},
        600,
    )
    assert lags == [None, None, None]


def test_steps_hold_each_value_until_the_next_and_integrate() -> None:
    line = Steps([10.0, 30.0], [2.0, 5.0])
    assert [line.at(t, before=1.0) for t in (0, 10, 29.9, 30, 100)] == [1, 2, 2, 5, 5]
    assert line.integral(0.0, 40.0, before=1.0) == pytest.approx(10 * 1 + 20 * 2 + 10 * 5)


@given(st.lists(st.integers(1, 60), min_size=2, max_size=40))
def test_a_run_agrees_with_itself_and_with_itself_one_period_late(counts: list[int]) -> None:
    times = [60.0 * (i + 1) for i in range(len(counts))]
    ours = Steps(times, [float(c) for c in counts])
    late = Steps([t + 60 for t in times], [float(c) for c in counts])
    duration = times[-1]
    minutes, agreeing = desired_agreement(ours, ours, 0.0, duration, 60.0, counts[0])
    assert minutes == agreeing == math.floor(duration / 60) + 1
    minutes, agreeing = desired_agreement(ours, late, 0.0, duration, 60.0, counts[0])
    assert agreeing == minutes


def test_desired_counts_agree_within_one_instance_or_ten_percent() -> None:
    sim = Steps([0.0], [30.0])
    for ours, agrees in ((33, True), (34, False), (27, True), (26, False)):
        _, agreeing = desired_agreement(Steps([0.0], [float(ours)]), sim, 0.0, 60.0, 10.0, 1)
        assert bool(agreeing) is agrees
    small = Steps([0.0], [2.0])
    _, agreeing = desired_agreement(Steps([0.0], [3.0]), small, 0.0, 60.0, 10.0, 1)
    assert agreeing == 2  # one instance off is within max(1, 10 %)


def test_only_minutes_after_the_first_scale_out_count() -> None:
    line = Steps([0.0], [1.0])
    assert desired_agreement(line, line, 150.0, 600.0, 60.0, 1) == (8, 8)


def test_shed_share_agrees_within_three_sd_of_the_replays_plus_one_request() -> None:
    replays = [0.010, 0.012, 0.011, 0.009, 0.013]
    spread = shed_spread(0.011, 10_000, replays)
    sd = 0.0015811388300841896
    assert spread.tolerance == pytest.approx(3 * sd * math.sqrt(1 + 1 / 5) + 1e-4)
    assert spread.passed
    assert not shed_spread(0.011 + spread.tolerance * 1.01, 10_000, replays).passed
    never = shed_spread(1 / 1000, 1000, [0.0, 0.0, 0.0])
    assert never.passed and not shed_spread(2 / 1000, 1000, [0.0, 0.0]).passed


@pytest.mark.parametrize(
    ("out", "shed", "verdict"),
    [
        (None, None, None),
        (None, 30.0, False),
        (100.0, None, True),
        (100.0, 90.0, False),
        (100.0, 100.0, True),
        (100.0, 200.0, True),
    ],
)
def test_scaled_out_before_shedding(
    out: float | None, shed: float | None, verdict: bool | None
) -> None:
    assert scaled_out_before_shedding(out, shed) is verdict


def test_a_rehearsal_is_judged_as_one_more_replay() -> None:
    everyone = [[True] * 4 for _ in range(4)]
    assert exchangeable([True] * 4, everyone).passed
    assert not exchangeable([True, True, True, False], everyone).passed  # they all agree
    halves = [[(i < 2) == (j < 2) for j in range(4)] for i in range(4)]  # two camps of two
    judged = exchangeable([False, False, True, True], halves)
    assert judged.passed and judged.share == 0.5
    assert judged.replay_quantile == pytest.approx(1 / 3)
    assert not exchangeable([False] * 4, halves).passed


def test_the_replays_band_spans_every_replay_a_period_either_side_and_holds_the_rehearsal() -> None:
    early = Steps([0.0, 120.0], [1.0, 20.0])  # scales out at 2 min
    late = Steps([0.0, 180.0], [1.0, 14.0])  # a minute later, to fewer
    band = replay_band([early, late], 150.0, 300.0, 60.0, 1)
    assert band == [
        (180.0, 1.0, 20.0),  # a period early, `late` still holds 1
        (240.0, 14.0, 20.0),
        (300.0, 14.0, 20.0),
    ]
    between = Steps([0.0, 150.0], [1.0, 17.0])
    assert within_band(between, band, 1) == 3
    beyond = Steps([0.0, 150.0], [1.0, 23.0])  # 20 + max(1, 2) is 22
    assert within_band(beyond, band, 1) == 0
    below = Steps([0.0, 150.0], [1.0, 12.0])  # 14 − max(1, 1.4) is 12.6; the first band holds 1
    assert within_band(below, band, 1) == 1


def test_the_fleet_rules_desired_verdict_is_the_band_on_95_percent_of_minutes() -> None:
    """The pairwise verdict passes anything once no two replays agree (quantile 0); the band
    verdict does not."""
    nobody = [[i == j for j in range(4)] for i in range(4)]
    assert exchangeable([False] * 4, nobody).passed  # why the fleet rule needs another verdict
    assert band_passed(19, 20) and band_passed(0, 0)
    assert not band_passed(18, 20)  # 90 % of minutes
    far = Steps([0.0, 150.0], [1.0, 40.0])
    band = replay_band([Steps([0.0, 120.0], [1.0, 20.0])], 150.0, 300.0, 60.0, 1)
    assert not band_passed(within_band(far, band, 1), len(band))


def test_the_fleet_rules_shed_verdict_is_the_replays_5_to_95_percent_range() -> None:
    replays = [0.001 * k for k in range(1, 21)]  # 0.1 % … 2 %
    assert shed_range(0.01, 10**6, replays).passed
    assert not shed_range(0.03, 10**6, replays).passed
    assert not shed_range(0.0, 10**6, replays).passed  # the replays all shed, it did not
    nothing = [0.0] * 20
    assert shed_range(0.0, 10**6, nothing).passed  # both 0
    assert shed_range(1e-6, 10**6, nothing).passed  # one request of a million: the slack
    assert not shed_range(3e-6, 10**6, nothing).passed
