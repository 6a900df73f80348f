"""Measured curves over the ladder's rungs, linearly interpolated between rungs.

Throughput X(N) is the achieved rps at each rung, with X(0) = 0 and held flat past the last
rung; the CloudWatch ratio is interpolated the same way over the rungs that measured it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tts_bench.artifacts.schema import Rung


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


def cloudwatch_ratio_curve(rungs: Sequence[Rung]) -> Curve | None:
    """The CloudWatch/client concurrency ratio per rung, or None when no rung measured it."""
    measured = [r for r in rungs if r.cloudwatch_ratio is not None]
    if not measured:
        return None
    return Curve(
        xs=tuple(float(r.concurrency) for r in measured),
        ys=tuple(float(r.cloudwatch_ratio) for r in measured),  # type: ignore[arg-type]
    )
