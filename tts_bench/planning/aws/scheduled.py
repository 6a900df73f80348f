"""Application Auto Scaling's scheduled actions: when one runs and what it does to a target.

A scheduled action (PutScheduledAction) names a schedule (`cron(...)`, `at(...)` or
`rate(...)`) read in its time zone, and a ScalableTargetAction: a new MinCapacity, MaxCapacity
or both. When it runs, the target takes the new bounds and a desired count below the new minimum
is scaled out to it, one above the new maximum scaled in to it ("How scheduled scaling for
Application Auto Scaling works"). While ScheduledScalingSuspended is set no action runs, and
resuming does not run the ones whose time passed meanwhile.

The plan deploys daily crons only (`daily_cron`); `fire_times` reads those and one-time `at`
expressions, which is what the local cloud and `thaw` need. Other forms are refused by name
(`UnsupportedSchedule`), never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tts_bench.errors import TtsBenchError

DAY = timedelta(days=1)
# A daily cron at one minute of one hour: minutes, hours, day of month, month, day of week, year.
_DAILY = re.compile(r"cron\((\d{1,2}) (\d{1,2}) \* \* \? \*\)")
_AT = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")


class UnsupportedSchedule(TtsBenchError):
    """A schedule expression or time zone this emulation does not read."""


@dataclass(frozen=True)
class ScheduledAction:
    """One scheduled action on a scalable target, as PutScheduledAction takes it."""

    name: str
    schedule: str
    timezone: str
    min_capacity: int | None
    max_capacity: int | None


def daily_cron(at_s: int) -> str:
    """The cron expression that runs every day at `at_s` seconds past midnight (whole minutes)."""
    minute = at_s // 60
    return f"cron({minute % 60} {minute // 60 % 24} * * ? *)"


def _zone(timezone: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise UnsupportedSchedule(f"time zone {timezone!r} is not an IANA time zone") from None


def fire_times(schedule: str, timezone: str | None, after_s: float, until_s: float) -> list[float]:
    """Unix seconds at which `schedule` runs within (after_s, until_s], in order."""
    zone = _zone(timezone)
    if at := _AT.fullmatch(schedule):
        when = datetime.fromisoformat(at.group(1)).replace(tzinfo=zone).timestamp()
        return [when] if after_s < when <= until_s else []
    daily = _DAILY.fullmatch(schedule)
    if daily is None:
        raise UnsupportedSchedule(
            f"schedule {schedule!r}: only daily crons `cron(M H * * ? *)` and `at(...)` are read"
        )
    minute, hour = int(daily.group(1)), int(daily.group(2))
    if minute > 59 or hour > 23:
        raise UnsupportedSchedule(f"schedule {schedule!r}: no such time of day")
    day: date = datetime.fromtimestamp(after_s, zone).date() - DAY
    last = datetime.fromtimestamp(until_s, zone).date()
    times = []
    while day <= last:
        when = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone).timestamp()
        if after_s < when <= until_s:
            times.append(when)
        day += DAY
    return times


def due(
    actions: tuple[ScheduledAction, ...] | list[ScheduledAction], after_s: float, until_s: float
) -> list[tuple[float, ScheduledAction]]:
    """Every run of `actions` within (after_s, until_s], in time order (name breaks a tie)."""
    runs = [
        (when, action)
        for action in actions
        for when in fire_times(action.schedule, action.timezone, after_s, until_s)
    ]
    return sorted(runs, key=lambda run: (run[0], run[1].name))


def run_action(action: ScheduledAction, low: int, high: int, desired: int) -> tuple[int, int, int]:
    """(min, max, desired) after `action` runs on a target at (low, high) holding `desired`."""
    low = low if action.min_capacity is None else action.min_capacity
    high = high if action.max_capacity is None else action.max_capacity
    if low > high:
        raise UnsupportedSchedule(
            f"scheduled action {action.name}: MinCapacity {low} above MaxCapacity {high}"
        )
    return low, high, min(max(desired, low), high)


def held_at(
    actions: tuple[ScheduledAction, ...] | list[ScheduledAction],
    low: int,
    high: int,
    since_s: float,
    at_s: float,
) -> tuple[int, int]:
    """The (min, max) a target at (low, high) at `since_s` holds at `at_s` once every action
    due in between has run."""
    for _, action in due(actions, since_s, at_s):
        low, high, _ = run_action(action, low, high, low)
    return low, high
