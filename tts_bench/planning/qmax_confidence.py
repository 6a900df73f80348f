"""The `qmax_confidence` finding: how well the ladder knows Q_max, and what its ends would deploy.

The plan is derived from the artifact's Q_max, which a ladder with p95 intervals (issue 38)
records on its `q_max_basis`: the conservative value (every rung up to it passed on its
interval's upper end) unless `--q-max-basis point` chose the point one. Such a ladder also
records Q_max as an interval, from the conservative value to the largest rung not failed. The finding says
how wide that is, and what the same plan derived at its ends would deploy instead. A ladder
without intervals (older, or the reference) gets no finding, so its plan is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_bench.artifacts.plan import Finding, Verdict
from tts_bench.artifacts.qmax import QmaxBasis, QmaxInterval


@dataclass(frozen=True, slots=True)
class PlanAt:
    """The deployed figures a plan derived at `q_max` would have."""

    q_max: int
    scaling_target_value: float
    max_instances: int


def _changes(here: PlanAt, other: PlanAt) -> str:
    return (
        f"at {other.q_max} the plan would deploy target {other.scaling_target_value:.3f} "
        f"(this plan {here.scaling_target_value:.3f}), queue bound {other.q_max} ({here.q_max}) "
        f"and at most {other.max_instances} instances ({here.max_instances})"
    )


def _width(interval: QmaxInterval) -> str:
    low = "below the first rung" if interval.low is None else str(interval.low)
    high = "none" if interval.high is None else str(interval.high)
    above = (
        f", {interval.failing_above} failed"
        if interval.failing_above is not None
        else ", no rung above failed"
    )
    undecided = ", ".join(map(str, interval.undecided)) or "none"
    return (
        f"Q_max lies in [{low}, {high}] at {interval.level:.0%}{above} (undecided rungs: "
        f"{undecided})"
    )


def describe_basis(basis: QmaxBasis | None) -> str:
    """Which Q_max an artifact's is, in words (the plan's printout and the report say it)."""
    if basis == "conservative":
        return "the conservative value"
    if basis == "point":
        return (
            "the point value, chosen with --q-max-basis point: the gate lets a plan on it scale "
            "only a local image"
        )
    return "the point value: the ladder predates --q-max-basis"


def qmax_confidence(
    interval: QmaxInterval,
    here: PlanAt,
    low: PlanAt | None,
    top: PlanAt | None,
    basis: QmaxBasis | None = None,
) -> Finding:
    """Warn when the plan's Q_max is above the conservative value (it rests on a rung whose p95
    the window did not show within the SLO); else ok, with what a plan at the top would change.
    `low` and `top`: the plan at those ends where they differ from `here`; `basis` the ladder's
    `q_max_basis`, which the message names."""
    parts = [f"{_width(interval)}; this plan uses {here.q_max} ({describe_basis(basis)})"]
    parts += [_changes(here, other) for other in (low, top) if other is not None]
    decided = interval.low is not None and interval.low >= here.q_max
    if not decided:
        parts.append(
            "the plan's Q_max is not shown within the SLO at this level: hold its rungs longer "
            "(--max-hold-s) or plan at the conservative end"
        )
    return Finding(
        name="qmax_confidence",
        verdict=Verdict.OK if decided else Verdict.WARN,
        message="; ".join(parts),
        level=interval.level,
        q_max_low=interval.low,
        q_max_high=interval.high,
        failing_above=interval.failing_above,
        target_at_high=None if top is None else top.scaling_target_value,
        max_instances_at_high=None if top is None else top.max_instances,
        target_at_low=None if low is None else low.scaling_target_value,
        max_instances_at_low=None if low is None else low.max_instances,
    )
