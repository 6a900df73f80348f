"""A day's needs merged into few MinCapacity steps (scheduled actions).

1. **The floor.** Each minute that follows a ramp the reactive rule cannot follow
   (`day.unfollowable`, within one lead after it) wants its need at λ_out; other minutes want
   only the plan's `min_instances`. A forecast's day comes earlier or later than told: each want
   is held `hold_s` either side of its minute (`FORECAST_HOLD_S`, the ±30 min the forecast
   errors are judged at), and wants the need of its rate × `load_scale` (`FORECAST_LOAD_SCALE`,
   the ×1.2 load they are judged at: a surge on a day busier than told is otherwise past the
   headroom a step sized at λ_out keeps). A step acts a lead before the minutes it serves, so
   the floor at minute m is the largest held want over m .. m + lead (whole minutes), within the
   plan's min and max. A day that repeats (a period shorter than the day) wraps: its last
   minutes hold the wants of the next period's first, and its first those of the last period's
   end.
2. **The merge.** The floor's runs of equal value are the per-minute schedule (one scheduled
   action per run). Adjacent runs are merged greedily, cheapest first, into one run at the
   higher value: a merge only raises MinCapacity, so it never takes capacity away where the floor
   wanted it. Its cost is what the fleet then holds beyond what it would anyway: the fleet holds
   at least the reactive rule's need, so a minute at floor v costs max(v, need) instance-minutes.
   Merging stops when the next merge would take the extra past `MERGE_TOLERANCE` of the day's
   need (instance-minutes at λ_out), but goes on while the schedule has more steps than AWS holds
   (`MAX_SCHEDULED_ACTIONS`).

Greedy, not optimal: a dynamic program over K steps is exact but cubic in the day's minutes
with this cost; the greedy's extra is measured (docs/simulation.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tts_bench.artifacts.plan import MAX_SCHEDULED_ACTIONS
from tts_bench.planning.schedule.day import (
    MINUTE_S,
    instances_needed,
    lead_minutes,
    max_ahead,
    unfollowable,
)

# Merged steps may hold up to 1 % more instance-minutes than the day needs at λ_out.
MERGE_TOLERANCE = 0.01
# How far either side of its minute a want is held: the ±30 min a forecast may be off by
# (`simulate.check.FORECAST_ERRORS` judges the schedule at that shift).
FORECAST_HOLD_S = 1800.0
# How much more load than told a want holds: the ×1.2 a forecast may be off by
# (`simulate.check.FORECAST_ERRORS` judges the schedule at that scale).
FORECAST_LOAD_SCALE = 1.2


@dataclass(frozen=True)
class DayFleet:
    """What a schedule is derived from, besides the day's rates."""

    per_instance_rps: float  # λ_out
    surge_ratio: float
    lead_s: float  # the planned T_total: detection lag plus start-up
    min_instances: int
    max_instances: int
    hold_s: float = 0.0  # each want held this long either side of its minute
    load_scale: float = 1.0  # each want the need of this multiple of its minute's rate


@dataclass(frozen=True)
class Step:
    start_minute: int
    min_capacity: int


def floor_per_minute(rates_rps: np.ndarray, fleet: DayFleet, cyclic: bool = False) -> np.ndarray:
    """The MinCapacity each minute wants (step 1 above); `cyclic`: the rates are one period of
    a day that repeats, so the lead and hold reach across its ends."""
    lead = lead_minutes(fleet.lead_s)
    if cyclic:
        n = len(rates_rps)
        # enough whole periods either side for the cover, hold and lead to see past an end
        reach = -(-(2 * lead + round(fleet.hold_s / MINUTE_S)) // n)
        around = floor_per_minute(np.tile(rates_rps, 2 * reach + 1), fleet)
        return around[reach * n : (reach + 1) * n]
    fast = unfollowable(rates_rps, fleet.per_instance_rps, fleet.surge_ratio, lead)
    # minute k is covered when a fast minute lies within k − lead .. k − 1
    seen = np.concatenate(([0], np.cumsum(fast)))
    k = np.arange(len(rates_rps))
    covered = seen[k] - seen[np.maximum(k - lead, 0)] > 0
    want = instances_needed(rates_rps * fleet.load_scale, fleet.per_instance_rps)
    wanted = held(np.where(covered, want, 0), round(fleet.hold_s / MINUTE_S))
    ahead = np.maximum(wanted, max_ahead(wanted, lead))
    return np.clip(ahead, fleet.min_instances, fleet.max_instances)


def held(values: np.ndarray, minutes: int) -> np.ndarray:
    """For each minute m, the largest value over m − `minutes` .. m + `minutes` (within the day)."""
    if minutes <= 0:
        return values
    padded = np.concatenate(
        (np.zeros(minutes, values.dtype), values, np.zeros(minutes, values.dtype))
    )
    return np.lib.stride_tricks.sliding_window_view(padded, 2 * minutes + 1).max(axis=1)


def merged_steps(
    floor: np.ndarray, need: np.ndarray, tolerance: float = MERGE_TOLERANCE
) -> list[Step]:
    """The floor's runs merged greedily (step 2 above)."""
    change = np.flatnonzero(np.diff(floor)) + 1
    starts = [0, *change.tolist()]
    ends = [*change.tolist(), len(floor)]
    values = [int(floor[s]) for s in starts]
    held = [_held(need, s, e, v) for s, e, v in zip(starts, ends, values, strict=True)]

    def extra(i: int) -> float:  # merging run i with run i + 1
        merged = _held(need, starts[i], ends[i + 1], max(values[i], values[i + 1]))
        return merged - held[i] - held[i + 1]

    extras = [extra(i) for i in range(len(starts) - 1)]
    budget = tolerance * float(need.sum())
    spent = 0.0
    while extras:
        i = int(np.argmin(extras))
        if len(starts) <= MAX_SCHEDULED_ACTIONS and spent + extras[i] > budget:
            break
        spent += extras[i]
        values[i] = max(values[i], values[i + 1])
        ends[i] = ends[i + 1]
        held[i] += held[i + 1] + extras[i]
        del starts[i + 1], ends[i + 1], values[i + 1], held[i + 1], extras[i]
        for j in (i - 1, i):  # the merged run's neighbours' merges changed
            if 0 <= j < len(extras):
                extras[j] = extra(j)
    return [Step(s, v) for s, v in zip(starts, values, strict=True)]


def _held(need: np.ndarray, start: int, end: int, value: int) -> float:
    """Instance-minutes the fleet holds over [start, end) with MinCapacity `value`."""
    return float(np.maximum(need[start:end], value).sum())


def schedule_steps(rates_rps: np.ndarray, fleet: DayFleet, cyclic: bool = False) -> list[Step]:
    need = instances_needed(rates_rps, fleet.per_instance_rps)
    return merged_steps(floor_per_minute(rates_rps, fleet, cyclic), need)
