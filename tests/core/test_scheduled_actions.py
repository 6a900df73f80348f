"""Application Auto Scaling's scheduled actions (`planning.aws.scheduled`): when a deployed
daily cron runs, and what a run does to a target's bounds and desired count."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.planning.aws.scheduled import (
    ScheduledAction,
    UnsupportedSchedule,
    due,
    fire_times,
    held_at,
    period_problem,
    recurring_cron,
    run_action,
)

DAY_S = 86_400.0
MIDNIGHT = datetime(2026, 12, 4, tzinfo=UTC).timestamp()


def action(name: str, at_s: int, low: int | None, high: int | None = 20) -> ScheduledAction:
    return ScheduledAction(name, recurring_cron(at_s), "Etc/UTC", low, high)


@given(minute=st.integers(0, 24 * 60 - 1), day=st.integers(0, 400))
def test_a_daily_cron_runs_once_a_day_at_its_minute(minute: int, day: int) -> None:
    start = MIDNIGHT + day * DAY_S
    times = fire_times(recurring_cron(minute * 60), "Etc/UTC", start - 1, start + 3 * DAY_S - 1)
    assert times == [start + minute * 60 + k * DAY_S for k in range(3)]


# Every period one cron can repeat within a day: whole hours dividing it, minutes dividing the hour.
PERIODS = [p for p in range(60, 86_401, 60) if period_problem(p) is None]


def test_the_periods_one_cron_holds() -> None:
    hours = [3600 * h for h in (1, 2, 3, 4, 6, 8, 12, 24)]
    minutes = [60 * m for m in (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)]
    assert sorted({*minutes, *hours}) == PERIODS
    assert "does not divide a day" in (period_problem(10_000) or "")
    assert "neither whole hours" in (period_problem(5400) or "")


def test_a_recurring_cron_by_hand() -> None:
    assert recurring_cron(5820, 14_400) == "cron(37 1,5,9,13,17,21 * * ? *)"
    assert recurring_cron(600, 1800) == "cron(10,40 * * * ? *)"
    assert recurring_cron(5820) == "cron(37 1 * * ? *)"
    assert recurring_cron(3 * 86_400 + 7 * 3600, 7 * 86_400) == "cron(0 7 ? * THU *)"
    times = fire_times("cron(37 1,5,9,13,17,21 * * ? *)", "Etc/UTC", MIDNIGHT, MIDNIGHT + DAY_S)
    assert [t - MIDNIGHT for t in times] == [5820 + k * 14_400 for k in range(6)]
    # 2026-12-04 is a Friday: the weekday crons run on it and on Monday to Thursday after.
    week = fire_times("cron(0 9 ? * MON-FRI *)", "UTC", MIDNIGHT, MIDNIGHT + 7 * DAY_S)
    assert [(t - MIDNIGHT) / DAY_S for t in week] == [0.375, 3.375, 4.375, 5.375, 6.375]
    assert fire_times("cron(0 9 ? * 1,7 *)", "UTC", MIDNIGHT, MIDNIGHT + 7 * DAY_S) == [
        MIDNIGHT + 1.375 * DAY_S,
        MIDNIGHT + 2.375 * DAY_S,
    ]


@given(data=st.data(), day=st.integers(0, 400))
def test_a_recurring_cron_runs_every_period_from_its_time(data: st.DataObject, day: int) -> None:
    period = data.draw(st.sampled_from(PERIODS))
    at = 60 * data.draw(st.integers(0, period // 60 - 1))
    start = MIDNIGHT + day * DAY_S
    times = fire_times(recurring_cron(at, period), "Etc/UTC", start - 1, start + DAY_S - 1)
    assert times == [start + at + k * period for k in range(86_400 // period)]


def test_runs_come_in_time_order_across_midnight() -> None:
    late, early = action("late", 23 * 3600 + 50 * 60, 5), action("early", 10 * 60, 1)
    runs = due([early, late], MIDNIGHT + 23 * 3600, MIDNIGHT + DAY_S + 3600)
    assert [(when - MIDNIGHT, a.name) for when, a in runs] == [
        (23 * 3600 + 50 * 60, "late"),
        (DAY_S + 600, "early"),
    ]
    # An interval that ends on a run includes it; one that starts on it does not.
    assert due([early], MIDNIGHT + 600, MIDNIGHT + 601) == []
    assert len(due([early], MIDNIGHT, MIDNIGHT + 600)) == 1


def test_a_time_zone_moves_the_run() -> None:
    times = fire_times("cron(0 9 * * ? *)", "Asia/Tokyo", MIDNIGHT, MIDNIGHT + DAY_S)
    assert times == [MIDNIGHT + DAY_S]  # 09:00 in Tokyo is 00:00 UTC (of the next day here)
    assert fire_times("at(2026-12-04T06:30:00)", None, MIDNIGHT, MIDNIGHT + DAY_S) == [
        MIDNIGHT + 6.5 * 3600
    ]


@pytest.mark.parametrize(
    ("before", "step", "after"),
    [
        ((1, 20, 3), (8, 20), (8, 20, 8)),  # below the new minimum: scaled out to it
        ((8, 20, 12), (1, 20), (1, 20, 12)),  # a lower minimum removes nothing
        ((1, 20, 15), (None, 10), (1, 10, 10)),  # above the new maximum: scaled in to it
    ],
)
def test_a_run_sets_the_bounds_and_moves_the_desired_count_into_them(
    before: tuple[int, int, int], step: tuple[int | None, int], after: tuple[int, int, int]
) -> None:
    assert run_action(action("a", 0, *step), *before) == after


def test_the_bounds_held_after_a_stretch_are_the_last_runs() -> None:
    actions = [action("up", 3600, 8), action("down", 7200, 2)]
    assert held_at(actions, 1, 20, MIDNIGHT, MIDNIGHT + 5400) == (8, 20)
    assert held_at(actions, 1, 20, MIDNIGHT, MIDNIGHT + 3 * DAY_S) == (2, 20)
    assert held_at(actions, 1, 20, MIDNIGHT + 7200, MIDNIGHT + 7300) == (1, 20)


@pytest.mark.parametrize(
    ("schedule", "timezone", "says"),
    [
        ("rate(5 minutes)", "UTC", "no `rate`"),
        ("cron(0/15 9 * * ? *)", "UTC", "0/15 is no value this reads"),
        ("cron(0 9 ? * 2#1 *)", "UTC", "2#1 is no value this reads"),
        ("cron(0 9 1 * ? *)", "UTC", "every day of every month"),
        ("cron(0 9 * * MON *)", "UTC", "in the day-of-month or day-of-week field"),
        ("cron(75 9 * * ? *)", "UTC", "75 is no value this reads"),
        ("cron(0 24 * * ? *)", "UTC", "24 is no value this reads"),
        ("cron(0 9 * * ? *)", "Mars/Olympus", "not an IANA time zone"),
    ],
)
def test_what_it_cannot_read_is_refused_by_name(schedule: str, timezone: str, says: str) -> None:
    with pytest.raises(UnsupportedSchedule, match=says):
        fire_times(schedule, timezone, MIDNIGHT, MIDNIGHT + DAY_S)


def test_min_above_max_is_refused() -> None:
    with pytest.raises(UnsupportedSchedule, match="MinCapacity 30 above MaxCapacity 20"):
        run_action(action("a", 0, 30), 1, 20, 1)
