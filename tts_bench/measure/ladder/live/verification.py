"""Verification rungs: after the ladder, hold C_scale_max and C_scale_min to measure CloudWatch there.

The plan converts each threshold into CloudWatch units by CloudWatch's ratio to the client's
concurrency *at that threshold* (SPEC §6). The ratio falls with load on a convex curve, so the
ladder's rungs either side only bound it; two more rungs, held once Q_max is known, measure it
where it is used (a level a usable ladder rung held already is read from that rung instead).
This module is the pure part: which levels (for a surge ratio, rounded to whole users), which
of them a ladder rung held, the ladder of their own the rest are held as once the ladder found
Q_max (under the same freeze), and how a rung and CloudWatch's readings become a
`VerificationRung` (`verification_from_runs`: from the ladder's and the held run's schedules and
rungs, as the live ladder joins them and `tts-bench verify` recomputes them).
The fleet rule deploys on InvocationsPerInstance, a one-minute Sum, at 60 · λ_out times its
ratio to the client's count (`planning.fleet_rule`). A third level, `fleet`, holds the users
whose closed loop sits nearest λ_out (the fleet rule's c_scale_max) for long enough that
`MIN_INVOCATION_MINUTES` whole minutes of it are read: three minutes of the cloud's clock hold two
whole ones whatever the phase the rung starts in. A ladder rung at those users whose hold already
held them is read instead. λ_out's margin depends on the planned T_total, not yet measured here,
so the level takes the margin's floor (the highest λ_out a plan can have).

`live_ladder` drives it; nothing here touches the network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT, LADDER_RATIO_STAT, CloudWatchStat
from tts_bench.artifacts.rungs import LadderSettings, Rung, VerificationRung, VerificationSource
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder.live.cloudwatch_join import (
    INVOCATIONS_PERIOD_S,
    MIN_INVOCATION_MINUTES,
    MetricPoint,
    cloud_window,
    invocations_ratio,
    rung_mean,
    whole_minutes,
)
from tts_bench.measure.ladder.schedule import LadderSchedule, format_duration
from tts_bench.measure.samples import Sample
from tts_bench.planning.birth_death import stationary_occupancy
from tts_bench.planning.curve import throughput_curve
from tts_bench.planning.fleet_rule import FLEET_MARGIN_FLOOR
from tts_bench.planning.rounding import round9

DEFAULT_PLAN_SURGE_RATIO = 1.25
Role = Literal["scale_out", "scale_in", "fleet"]
# The hold, in the cloud's seconds, that holds MIN_INVOCATION_MINUTES whole minutes in any phase.
FLEET_HOLD_S = (MIN_INVOCATION_MINUTES + 1) * INVOCATIONS_PERIOD_S


class VerificationError(TtsBenchError):
    """Verification rungs cannot be planned from these inputs."""


@dataclass(frozen=True, slots=True)
class VerificationLevel:
    """One threshold to hold: its role, where it sits in client concurrency, and the users held."""

    role: Role
    at: float  # C_scale_max or C_scale_min, as the plan derives it (fleet: E[n] at λ_out)
    users: int  # rounded to whole users, half up

    @property
    def counts_invocations(self) -> bool:
        """Held for whole minutes of InvocationsPerInstance (the fleet rule's level)."""
        return self.role == "fleet"


def verification_levels(
    q_max: int, surge_ratio: float = DEFAULT_PLAN_SURGE_RATIO
) -> tuple[VerificationLevel, ...]:
    """C_scale_max then C_scale_min for `surge_ratio`, the arithmetic `plan` uses (SPEC §6)."""
    h = round9(surge_ratio - 1)
    if h <= 0 or h >= 0.5:
        raise VerificationError(
            f"--plan-surge-ratio {surge_ratio:g} is out of range: it must be above 1 and below 1.5"
        )
    if q_max < 1:
        raise VerificationError("no Q_max: the ladder found no passing rung to verify below")
    levels = []
    for role, fraction in (("scale_out", 1 - h), ("scale_in", 1 - 2 * h)):
        at = round9(fraction * q_max)
        levels.append(VerificationLevel(role, at, max(1, math.floor(at + 0.5))))  # type: ignore[arg-type]
    return tuple(levels)


def fleet_level(
    curve_rungs: Sequence[Rung], q_max: int, surge_ratio: float = DEFAULT_PLAN_SURGE_RATIO
) -> VerificationLevel:
    """The fleet rule's level: one instance's mean occupancy offered λ_out (`fleet_rule`), with
    the margin at its floor, in whole users and at least one (a closed loop cannot hold less)."""
    verification_levels(q_max, surge_ratio)  # the same refusals
    x_curve = throughput_curve(curve_rungs)
    scale_out_rps = x_curve(q_max) * (1 - FLEET_MARGIN_FLOOR) / surge_ratio
    at = round9(stationary_occupancy(scale_out_rps, x_curve.at, q_max))
    return VerificationLevel("fleet", at, max(1, math.floor(at + 0.5)))


def held_by_the_ladder(
    levels: Sequence[VerificationLevel],
    rungs: Sequence[Rung],
    ladder: LadderSettings | None = None,
) -> dict[int, int]:
    """Users of each level a usable coarse rung already held -> that rung's index.

    Such a level needs no hold of its own: the rung is the same closed-loop load at the same
    users under the same freeze, and its window is read for CloudWatch's ratios instead. The
    fleet level also needs the rung's hold (in `ladder`) to hold its whole minutes; when it did
    not, its users are held again for every level at them (one held rung serves them all)."""
    at = {rung.concurrency: i for i, rung in enumerate(rungs) if rung.usable}
    short = {
        level.users
        for level in levels
        if level.counts_invocations
        and level.users in at
        and not _holds_minutes(ladder, at[level.users])
    }
    return {
        level.users: at[level.users]
        for level in levels
        if level.users in at and level.users not in short
    }


def _holds_minutes(ladder: LadderSettings | None, index: int) -> bool:
    if ladder is None or ladder.start_epoch is None:
        return False
    return whole_minutes(*cloud_window(ladder, index, whole_hold=True)) >= MIN_INVOCATION_MINUTES


def verification_ladder(
    ladder: LadderSchedule,
    levels: tuple[VerificationLevel, ...],
    fleet_hold_s: float = FLEET_HOLD_S,
) -> LadderSchedule:
    """The levels as a ladder of their own, held with the ladder's timing: distinct user
    counts, ascending (both thresholds can round to one level when Q_max is small). The fleet
    level's rung alone is held at least `fleet_hold_s` (wall seconds: the cloud's `FLEET_HOLD_S`
    on its clock), as an extension of the ladder's hold, so the other levels cost no more: an
    unstable one is held no longer than the ladder's own `--max-hold-s` allows."""
    rungs = tuple(sorted({level.users for level in levels}))
    fleet = {level.users for level in levels if level.counts_invocations}
    extended = tuple(
        max(0.0, fleet_hold_s - ladder.hold_s) if users in fleet else 0.0 for users in rungs
    )
    longest = ladder.hold_s + max(extended, default=0.0)
    max_hold_s, unstable_max_hold_s = ladder.max_hold_s, None
    if any(extended):
        max_hold_s = max(ladder.max_hold_s or ladder.hold_s, longest)
        unstable_max_hold_s = ladder.max_hold_s or ladder.hold_s
    return LadderSchedule(
        rungs=rungs,
        hold_s=ladder.hold_s,
        measure_s=ladder.measure_s,
        idle_s=ladder.idle_s,
        max_hold_s=max_hold_s,
        extended_s=extended if any(extended) else (),
        unstable_max_hold_s=unstable_max_hold_s,
        # Three minutes hold two whole ones in any phase; the rung ends once it holds them.
        whole_minutes=MIN_INVOCATION_MINUTES if any(extended) else None,
    )


def all_levels(
    curve_rungs: Sequence[Rung], q_max: int, surge_ratio: float = DEFAULT_PLAN_SURGE_RATIO
) -> tuple[VerificationLevel, ...]:
    """C_scale_max, C_scale_min and the fleet rule's level, in that order."""
    return (*verification_levels(q_max, surge_ratio), fleet_level(curve_rungs, q_max, surge_ratio))


def describe_verification(
    ladder: LadderSchedule, surge_ratio: float, fleet_level: bool = True
) -> str:
    """The dry run's line: the levels depend on the Q_max the ladder has yet to find."""
    verification_levels(1, surge_ratio)  # a bad ratio is refused before anything runs
    fleet_hold_s = max(ladder.longest_hold_s, FLEET_HOLD_S) if fleet_level else 0.0
    extra_s = 2 * (ladder.longest_hold_s + ladder.idle_s) + fleet_hold_s
    extra_s += ladder.idle_s if fleet_level else 0.0
    held = (
        f"{ladder.hold_s:g} s"
        if ladder.longest_hold_s == ladder.hold_s
        else f"{ladder.hold_s:g} s (up to {ladder.longest_hold_s:g} s while unstable)"
    )
    fleet = (
        f", and one at the fleet rule's level held until {MIN_INVOCATION_MINUTES} whole minutes "
        f"of InvocationsPerInstance are read, at most {fleet_hold_s:g} s"
        if fleet_level
        else ", and none at the fleet rule's level (--no-fleet-level)"
    )
    return (
        f"then 2 verification rungs at C_scale_max = {2 - surge_ratio:g} x Q_max and "
        f"C_scale_min = {3 - 2 * surge_ratio:g} x Q_max (surge ratio {surge_ratio:g}), whole "
        f"users, each held {held} unless a ladder rung held those users already{fleet}: at most "
        f"{format_duration(extra_s)} more"
    )


def cloudwatch_ratios(
    readings: Mapping[CloudWatchStat, float | None], client_mean_in_flight: float
) -> dict[str, float]:
    """CloudWatch's reading per statistic over the client's mean in-flight, keyed `Maximum/10s`.

    A statistic CloudWatch returned nothing for is left out (never 0, never assumed)."""
    if client_mean_in_flight <= 0:
        return {}
    return {
        stat.key: value / client_mean_in_flight
        for stat, value in readings.items()
        if value is not None and value > 0
    }


def verification_rungs(
    levels: Sequence[VerificationLevel],
    surge_ratio: float,
    held: Sequence[Rung],
    readings: Sequence[Mapping[CloudWatchStat, float | None]],
    source: VerificationSource = "held",
    counted: Sequence[float | None] | None = None,
) -> list[VerificationRung]:
    """Each level's `VerificationRung` from the rung that held it and CloudWatch's readings in
    that rung's window (`readings[i]` belongs to `held[i]`); the fleet level's also carries
    `counted[i]`, InvocationsPerInstance's ratio over its hold's whole minutes.

    A level the run never reached (it stops after a failing rung) or that CloudWatch gave no
    reading for is left out: an unmeasured point is no point, and the plan says which rule it
    used instead."""
    invocations = [None] * len(held) if counted is None else counted
    by_users = {
        rung.concurrency: (rung, reading, count)
        for rung, reading, count in zip(held, readings, invocations, strict=True)
    }
    out = []
    for level in levels:
        if level.users not in by_users:
            continue
        rung, reading, count = by_users[level.users]
        ratios = cloudwatch_ratios(reading, rung.client_mean_in_flight)
        if level.counts_invocations and count is not None:
            ratios[INVOCATIONS_RATIO_STAT.key] = count
        if not ratios:
            continue
        out.append(
            VerificationRung(
                role=level.role,
                source=source,
                surge_ratio=surge_ratio,
                concurrency=level.users,
                achieved_rps=rung.achieved_rps,
                ttfab_p95_ms=rung.ttfab_p95_ms,
                client_mean_in_flight=rung.client_mean_in_flight,
                cloudwatch_ratios=ratios,
                usable=rung.usable,
                unusable_reason=rung.unusable_reason,
            )
        )
    return out


Run = tuple[LadderSettings | None, Sequence[Rung]]


def verification_from_runs(
    levels: Sequence[VerificationLevel],
    surge_ratio: float,
    from_ladder: Mapping[int, int],
    ladder_run: Run,
    held_run: Run | None,
    points: Sequence[MetricPoint],
    minutes: Sequence[MetricPoint] = (),
    samples: Sequence[Sample] = (),
) -> list[VerificationRung]:
    """`held_rungs` over the two runs' schedules and rungs (what `tts-bench verify` recomputes
    them from): the levels a ladder rung held read from it, the rest from the held run; the
    fleet level's invocations from `minutes` (the minute Sums) against `samples` (the client's)."""
    read_there = [level for level in levels if level.users in from_ladder]
    sources: list[tuple[VerificationSource, Run, list[int], list[VerificationLevel]]] = [
        ("ladder-rung", ladder_run, sorted(set(from_ladder.values())), read_there)
    ]
    if held_run is not None:
        rest = [level for level in levels if level.users not in from_ladder]
        sources.append(("held", held_run, list(range(len(held_run[1]))), rest))
    out: list[VerificationRung] = []
    for source, (ladder, run_rungs), indices, chosen in sources:
        if not chosen or ladder is None or ladder.start_epoch is None:
            continue
        readings = [{LADDER_RATIO_STAT: rung_mean(points, ladder, i)} for i in indices]
        rungs = [run_rungs[i] for i in indices]
        counted = [_counted(ladder, i, minutes, samples) for i in indices]
        out += verification_rungs(chosen, surge_ratio, rungs, readings, source, counted)
    order = [level.role for level in levels]
    return sorted(out, key=lambda rung: order.index(rung.role))


def _counted(
    ladder: LadderSettings, index: int, minutes: Sequence[MetricPoint], samples: Sequence[Sample]
) -> float | None:
    """InvocationsPerInstance's ratio over the whole minutes of rung `index`'s hold."""
    return invocations_ratio(minutes, samples, ladder, index)
