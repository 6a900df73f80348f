"""Verification rungs: after the ladder, hold C_scale_max and C_scale_min to measure CloudWatch there.

The plan converts each threshold into CloudWatch units by CloudWatch's ratio to the client's
concurrency *at that threshold* (SPEC §6). The ratio falls with load on a convex curve, so the
ladder's rungs either side only bound it; two more rungs, held once Q_max is known, measure it
where it is used. This module is the pure part: which levels (for a surge ratio, rounded to
whole users), when they run after the ladder, and how a held level and CloudWatch's readings
become a `VerificationRung`. The Locust shape and the CloudWatch join drive it; nothing here
touches the network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tts_bench.artifacts.schema import CloudWatchStat, VerificationRung
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder import CpuReading, LadderSchedule, Phase, rung_statistics
from tts_bench.measure.samples import Sample
from tts_bench.planning.rounding import round9

DEFAULT_PLAN_SURGE_RATIO = 1.25
Role = Literal["scale_out", "scale_in"]


class VerificationError(TtsBenchError):
    """Verification rungs cannot be planned from these inputs."""


@dataclass(frozen=True, slots=True)
class VerificationLevel:
    """One threshold to hold: its role, where it sits in client concurrency, and the users held."""

    role: Role
    at: float  # C_scale_max or C_scale_min, as the plan derives it
    users: int  # rounded to whole users, half up


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


@dataclass(frozen=True, slots=True)
class VerificationSchedule:
    """The levels held after the ladder, with the ladder's hold, measure and idle times."""

    levels: tuple[VerificationLevel, ...]
    hold_s: float
    measure_s: float
    idle_s: float
    offset_s: float  # test seconds at which the first verification rung begins

    @classmethod
    def after(
        cls, ladder: LadderSchedule, levels: tuple[VerificationLevel, ...], ladder_end_s: float
    ) -> VerificationSchedule:
        """Held once the ladder ended (it may stop early after its first failing rung)."""
        return cls(levels, ladder.hold_s, ladder.measure_s, ladder.idle_s, ladder_end_s)

    def start_s(self, index: int) -> float:
        return self.offset_s + index * (self.hold_s + self.idle_s)

    def window_s(self, index: int) -> tuple[float, float]:
        end = self.start_s(index) + self.hold_s
        return end - self.measure_s, end

    @property
    def phases(self) -> tuple[Phase, ...]:
        out: list[Phase] = []
        for i, level in enumerate(self.levels):
            start = self.start_s(i)
            out.append(Phase(level.users, start, start + self.hold_s, level.users))
            if self.idle_s > 0:
                out.append(Phase(0, start + self.hold_s, start + self.hold_s + self.idle_s, None))
        return tuple(out)

    @property
    def duration_s(self) -> float:
        return self.phases[-1].end_s - self.offset_s if self.levels else 0.0

    def describe(self) -> str:
        """The dry run's lines for the verification rungs."""
        lines = [f"then {len(self.levels)} verification rungs, held where the thresholds sit:"]
        for i, level in enumerate(self.levels):
            w0, w1 = self.window_s(i)
            name = "C_scale_max" if level.role == "scale_out" else "C_scale_min"
            lines.append(
                f"  {name} {level.at:g} -> {level.users} users, window "
                f"+{w0 - self.offset_s:.0f}s-+{w1 - self.offset_s:.0f}s after the ladder"
            )
        return "\n".join(lines)


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


def verification_rung(
    level: VerificationLevel,
    surge_ratio: float,
    samples: Sequence[Sample],
    cpu: Sequence[CpuReading],
    window: tuple[float, float],
    slo_ms: float,
    readings: Mapping[CloudWatchStat, float | None],
) -> VerificationRung | None:
    """The `VerificationRung` of one held level (window in unix time), or None when CloudWatch
    gave no reading for any statistic: an unmeasured point is no point."""
    stats = rung_statistics(samples, cpu, level.users, window, slo_ms)
    ratios = cloudwatch_ratios(readings, stats.client_mean_in_flight)
    if not ratios:
        return None
    return VerificationRung(
        role=level.role,
        surge_ratio=surge_ratio,
        concurrency=level.users,
        achieved_rps=stats.achieved_rps,
        ttfab_p95_ms=stats.ttfab_p95_ms,
        client_mean_in_flight=stats.client_mean_in_flight,
        cloudwatch_ratios=ratios,
        usable=stats.usable,
        unusable_reason=stats.unusable_reason,
    )
