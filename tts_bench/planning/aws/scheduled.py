"""Application Auto Scaling's scheduled actions: when one runs and what it does to a target.

A scheduled action (PutScheduledAction) names a schedule (`cron(...)`, `at(...)` or
`rate(...)`) read in its time zone, and a ScalableTargetAction: a new MinCapacity, MaxCapacity
or both. When it runs, the target takes the new bounds and a desired count below the new minimum
is scaled out to it, one above the new maximum scaled in to it ("How scheduled scaling for
Application Auto Scaling works"). While ScheduledScalingSuspended is set no action runs, and
resuming does not run the ones whose time passed meanwhile.

The plan deploys crons that recur with its day (`recurring_cron`): daily at one time, several
times a day for a day that repeats every few hours (an hour or minute list), or weekly on one day
(a day of the week). `fire_times` reads the cron forms AWS documents that those use (six fields,
values, comma lists and ranges for minutes, hours and day of week; `?` for the other day field),
and one-time `at` expressions: what the local cloud, the simulator and `thaw` need. Other forms
(`rate`, `/`, `L`, `W`, `#`, a day of the month, a month, a year) are refused by name
(`UnsupportedSchedule`), never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tts_bench.errors import TtsBenchError

DAY = timedelta(days=1)
DAY_S = 86_400
WEEK_S = 7 * DAY_S
# cron(Minutes Hours Day-of-month Month Day-of-week Year), AWS's six fields.
_CRON = re.compile(r"cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)")
_AT = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")
# AWS numbers the days of the week 1-7 from Sunday; Python's weekday() from Monday = 0.
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


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


def period_problem(period_s: int) -> str | None:
    """Why a day repeating every `period_s` cannot be deployed as one cron per step, or None.

    A period of a day or a week is a daily or a weekly cron. A shorter one must divide the day
    (each day then runs the same steps) and be whole hours (a step's runs share its minute: an
    hour list) or divide the hour (they share every hour: a minute list); otherwise its runs are
    no product of minutes and hours, which one cron cannot list."""
    if period_s in (DAY_S, WEEK_S):
        return None
    if period_s <= 0 or period_s % 60 or DAY_S % period_s:
        return f"a period of {period_s:g} s does not divide a day (86400 s) in whole minutes"
    if period_s % 3600 and 3600 % period_s:
        return (
            f"a period of {period_s:g} s is neither whole hours nor a divisor of an hour, so "
            "its runs are no cron's minute and hour lists"
        )
    return None


def recurring_cron(at_s: int, period_s: int = DAY_S) -> str:
    """The cron that runs at `at_s` seconds into a period (from 00:00, a week from Monday
    00:00) and again every `period_s` (`period_problem` says which periods one cron holds)."""
    if (problem := period_problem(period_s)) is not None:
        raise UnsupportedSchedule(problem)
    if period_s == WEEK_S:
        day = DAY_NAMES[(at_s // DAY_S + 1) % 7]  # day 0 is a Monday
        minute = at_s % DAY_S // 60
        return f"cron({minute % 60} {minute // 60} ? * {day} *)"
    runs = sorted({(at_s + k * period_s) % DAY_S // 60 for k in range(DAY_S // period_s)})
    minutes = sorted({m % 60 for m in runs})
    hours = sorted({m // 60 for m in runs})
    hour_field = "*" if len(hours) == 24 else ",".join(map(str, hours))
    return f"cron({','.join(map(str, minutes))} {hour_field} * * ? *)"


def _values(field: str, low: int, high: int, names: tuple[str, ...] = ()) -> set[int]:
    """A cron field's values: `*`, or a comma list of values and `a-b` ranges (names allowed
    where given, numbered from `low`)."""
    if field == "*":
        return set(range(low, high + 1))

    def one(text: str) -> int:
        if text.upper() in names:
            return low + names.index(text.upper())
        if not text.isdigit() or not low <= int(text) <= high:
            raise ValueError(text)
        return int(text)

    found: set[int] = set()
    for part in field.split(","):
        first, _, last = part.partition("-")
        a = one(first)
        b = one(last) if last else a
        if b < a:
            raise ValueError(part)
        found.update(range(a, b + 1))
    return found


def _cron_fields(schedule: str) -> tuple[set[int], set[int], set[int]] | None:
    """(minutes, hours, AWS days of the week) of a cron this reads; None when not a cron."""
    cron = _CRON.fullmatch(schedule)
    if cron is None:
        return None
    minutes, hours, day_of_month, month, day_of_week, year = cron.groups()
    if "?" not in (day_of_month, day_of_week):
        raise UnsupportedSchedule(
            f"schedule {schedule!r}: AWS needs `?` in the day-of-month or day-of-week field"
        )
    if month != "*" or year != "*" or day_of_month not in ("*", "?"):
        raise UnsupportedSchedule(
            f"schedule {schedule!r}: only crons on every day of every month and year are read "
            "(minutes, hours and day of week may list values)"
        )
    try:
        days = _values(day_of_week, 1, 7, DAY_NAMES) if day_of_week != "?" else set(range(1, 8))
        return _values(minutes, 0, 59), _values(hours, 0, 23), days
    except ValueError as exc:
        raise UnsupportedSchedule(
            f"schedule {schedule!r}: {exc} is no value this reads (values, `a-b` ranges and "
            "comma lists; no `/`, `L`, `W` or `#`)"
        ) from None


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
    fields = _cron_fields(schedule)
    if fields is None:
        raise UnsupportedSchedule(
            f"schedule {schedule!r}: only `cron(...)` and `at(...)` are read (no `rate`)"
        )
    minutes, hours, days = fields
    day: date = datetime.fromtimestamp(after_s, zone).date() - DAY
    last = datetime.fromtimestamp(until_s, zone).date()
    times = []
    while day <= last:
        if (day.weekday() + 1) % 7 + 1 in days:
            for hour in sorted(hours):
                for minute in sorted(minutes):
                    when = datetime(
                        day.year, day.month, day.day, hour, minute, tzinfo=zone
                    ).timestamp()
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
