"""The `ramp_rate` finding: how fast a day may grow for the reactive rule to follow it, and where
the given day grows faster.

A fleet sized for rate r holds N = ⌈r / λ_out⌉ instances and serves up to N · λ_out · s before it
sheds; what the rule adds serves one planned T_total later (L whole minutes). So it follows a
growth of up to (N · λ_out · s / r)^(1/L) per minute: at its slowest, for a fleet held exactly at
λ_out (r = N · λ_out), s^(1/L) at every size; a fleet of N sized for just over (N − 1) · λ_out
follows up to (s · N / (N − 1))^(1/L). The day's growth at minute m is its largest rate within
the next L minutes over r[m], per minute.
"""

from __future__ import annotations

import numpy as np

from tts_bench.artifacts.plan import Finding, Verdict
from tts_bench.planning.findings import finding
from tts_bench.planning.schedule.day import (
    instances_needed,
    lead_minutes,
    max_ahead,
    unfollowable,
)
from tts_bench.planning.schedule.steps import DayFleet

SIZES = (1, 2, 3, 5, 10, 30, 100, 300)


def percent_per_minute(factor: float, minutes: int) -> float:
    return 100 * (factor ** (1 / minutes) - 1)


DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # a week's day 0 is a Monday


def clock(minute: int, weekly: bool = False) -> str:
    """HH:MM of a minute of the day; with `weekly`, of the week, after its day's name."""
    time = f"{(minute // 60) % 24:02d}:{minute % 60:02d}"
    return f"{DAYS[minute // 1440 % 7]} {time}" if weekly else time


def ramp_rate(
    rates_rps: np.ndarray, fleet: DayFleet, scheduled: bool, weekly: bool = False
) -> Finding:
    lead = lead_minutes(fleet.lead_s)
    s = fleet.surge_ratio
    follows = percent_per_minute(s, lead)
    need = instances_needed(rates_rps, fleet.per_instance_rps)
    fast = unfollowable(rates_rps, fleet.per_instance_rps, s, lead)
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = np.where(rates_rps > 0, max_ahead(rates_rps, lead) / rates_rps, 1.0)
    sizes = ", ".join(
        f"{n}: {follows:.2f}–{percent_per_minute(s * n / (n - 1), lead):.2f}"
        if n > 1
        else f"1: {follows:.2f} up (a lone instance sized for less than λ_out follows more)"
        for n in SIZES
    )
    figures: dict[str, object] = {
        "follows_percent_per_minute": round(follows, 3),
        "lead_minutes": lead,
        "faster_minutes": int(fast.sum()),
    }
    text = (
        f"the reactive rule follows growth of at least {follows:.2f} % a minute at any fleet "
        f"size (×{s:g} per planned T_total of {fleet.lead_s:g} s, {lead} min); by fleet size, "
        f"% a minute: {sizes}"
    )
    if not fast.any():
        return finding("ramp_rate", Verdict.OK, text + "; the day never grows faster", **figures)  # type: ignore[arg-type]
    where = np.flatnonzero(fast)
    worst = int(where[np.argmax(growth[where])])
    figures["fastest_percent_per_minute"] = round(percent_per_minute(growth[worst], lead), 3)
    figures["fastest_at_fleet_size"] = int(need[worst])
    text += (
        f"; the day grows faster at {len(where)} minutes between {clock(int(where[0]), weekly)} "
        f"and {clock(int(where[-1]) + 1, weekly)} UTC, at fleet sizes {int(need[where].min())}–"
        f"{int(need[where].max())}, fastest {figures['fastest_percent_per_minute']:.2f} % a "
        f"minute at {clock(worst, weekly)} (fleet of {need[worst]})"
    )
    if scheduled:
        text += "; the schedule holds capacity ahead of them"
    verdict = Verdict.OK if scheduled else Verdict.WARN
    return finding("ramp_rate", verdict, text, **figures)  # type: ignore[arg-type]
