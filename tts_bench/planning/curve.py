"""Measured curves over the ladder's rungs.

Throughput X(N) is the achieved rps at each rung, linearly interpolated, with X(0) = 0 and
held flat past the last rung. The CloudWatch ratio is *not* interpolated: it falls with load on
a convex curve, so a chord between two rungs lies above it and a threshold converted by the
chord would fire scale-out late. `conservative_ratio` takes the ratio measured at the point,
else the smaller ratio of the two rungs either side (SPEC §6).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tts_bench.artifacts.cloudwatch import CloudWatchStat
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rungs import Rung


@dataclass(frozen=True)
class Curve:
    """y(x) through the points, linear between them and flat beyond the ends."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.xs or len(self.xs) != len(self.ys):
            raise ValueError("a curve needs at least one point and as many ys as xs")
        if any(b <= a for a, b in zip(self.xs, self.xs[1:], strict=False)):
            raise ValueError("curve xs must be strictly ascending")

    def __call__(self, x: float) -> float:
        return float(np.interp(x, self.xs, self.ys))

    def at(self, x: np.ndarray) -> np.ndarray:
        return np.interp(x, self.xs, self.ys)


def throughput_curve(rungs: Sequence[Rung]) -> Curve:
    """X(N) from the usable rungs (a client-bound rung's rps says nothing about the server)."""
    usable = [r for r in rungs if r.usable]
    if not usable:
        raise ValueError("no usable rung to build the throughput curve from")
    return Curve(
        xs=(0.0, *(float(r.concurrency) for r in usable)),
        ys=(0.0, *(r.achieved_rps for r in usable)),
    )


@dataclass(frozen=True)
class RatioReading:
    """CloudWatch's ratio at one point, and which rule produced it (`CloudWatchUnits.ratio_rule`)."""

    ratio: float
    rule: str
    where: str  # the rungs it came from, for the finding's message


def ratio_points(rungs: Sequence[Rung], stat: CloudWatchStat) -> tuple[tuple[float, float], ...]:
    """(concurrency, ratio) of every rung that read CloudWatch with `stat`, ascending."""
    return tuple(
        (float(r.concurrency), ratio) for r in rungs if (ratio := r.ratio(stat)) is not None
    )


def conservative_ratio(points: Sequence[tuple[float, float]], x: float) -> RatioReading | None:
    """The ratio at `x` from measured points: exact when a point sits there, else the smaller of
    the two either side (the nearest one beyond the ends); None when nothing was measured."""
    if not points:
        return None
    for at, ratio in points:
        if math.isclose(at, x, abs_tol=1e-9):
            return RatioReading(ratio, "ladder-rung", f"rung {at:g}")
    below = [p for p in points if p[0] < x]
    above = [p for p in points if p[0] > x]
    if below and above:
        (lo, r_lo), (hi, r_hi) = below[-1], above[0]
        return RatioReading(
            min(r_lo, r_hi), "smaller-bracketing", f"the smaller of rungs {lo:g} and {hi:g}"
        )
    at, ratio = below[-1] if below else above[0]
    return RatioReading(ratio, "nearest-rung", f"the nearest rung {at:g}")


def ratio_at(
    qmax: QmaxArtifact, stat: CloudWatchStat, x: float, role: str, surge_ratio: float
) -> RatioReading | None:
    """CloudWatch's ratio for `stat` where a threshold sits.

    A usable verification rung held for this threshold (`role`) at this surge ratio is the
    measurement itself; otherwise `conservative_ratio` over the ladder's rungs and every
    usable verification rung (a point measured for another surge ratio is still a point).
    """
    usable = [v for v in qmax.verification if v.usable and stat.key in v.cloudwatch_ratios]
    for v in usable:
        if v.role == role and math.isclose(v.surge_ratio, surge_ratio, abs_tol=1e-9):
            return RatioReading(
                v.cloudwatch_ratios[stat.key],
                "verification-rung",
                f"the verification rung held at {v.concurrency}",
            )
    merged: dict[float, float] = dict(ratio_points(qmax.rungs, stat))
    for v in usable:
        at = float(v.concurrency)
        # Two readings at one level: keep the smaller, the conservative one.
        merged[at] = min(merged.get(at, math.inf), v.cloudwatch_ratios[stat.key])
    return conservative_ratio(sorted(merged.items()), x)
