"""The policies a simulation compares: `plan`, `naive`, `fixed:N` and `plan+burst`.

- `plan`: the plan's scaling exactly as deployed (`deploy_shape.ScalingShape`).
- `naive`: the same, capped at the published uncontended formula's max instances, read from
  the plan's `fleet_sizing` finding (`naive_max_instances`); the formula lives in `planning`.
- `fixed:N`: N instances, no scaling.
- `plan+burst`: the plan plus a burst step-out. Target tracking reads a metric that saturates
  at `queue_max_depth`, so when the fleet is shedding it sees at most Q_max / target of the
  load (×1.33 for h = 0.25) and waits three datapoints to act. The burst is a second step
  policy on the same high-resolution metric (Maximum, 10 s) whose alarm fires on ONE
  datapoint at or above the midpoint between C_scale_max and Q_max, which a fleet reaches
  only on its way to shedding. Near Q_max the metric can no longer tell how much load
  there is, so the burst sizes the fleet for the largest load the plan promises to absorb:
  surge_ratio times the load that fills every instance to Q_max, brought back to C_scale_max
  by target tracking's own proportional rule, desired = ceil(in service × surge_ratio ×
  Q_max / C_scale_max) (×1.67 for the reference plan, against target tracking's ×1.33 at
  most), at once. It does not fire again until those instances serve (cooldown = planned
  T_total); scale-in later returns what was not needed. Application Auto Scaling applies the
  larger of the two policies' desired counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tts_bench.artifacts.schema import PlanArtifact
from tts_bench.errors import TtsBenchError
from tts_bench.planning.rounding import round9
from tts_bench.simulate.deploy_shape import ScalingShape
from tts_bench.simulate.service import ServiceCurves

POLICY_NAMES = ("plan", "naive", "fixed:N", "plan+burst")
# Instance counts are int64 in the fleet model and instance-seconds over a month must stay exact.
MAX_FIXED_INSTANCES = 1_000_000


@dataclass(frozen=True)
class BurstStep:
    threshold: float  # CloudWatch units, on the 10 s Maximum datapoint
    factor: float  # desired = ceil(in service × factor)
    cooldown_s: float


@dataclass(frozen=True)
class Policy:
    name: str
    scales: bool  # False: a fixed fleet, no policy at all
    min_instances: int
    max_instances: int
    burst: BurstStep | None = None


def parse_policy(
    name: str, plan: PlanArtifact, shape: ScalingShape, curves: ServiceCurves
) -> Policy:
    """One `--policy` value; an unknown one is a one-line `TtsBenchError`."""
    if name == "plan":
        return Policy("plan", True, shape.min_instances, shape.max_instances)
    if name == "naive":
        sizing = plan.finding("fleet_sizing")
        naive = sizing.figure("naive_max_instances") if sizing else None
        if not isinstance(naive, int):
            raise TtsBenchError(
                "policy naive: the plan's fleet_sizing finding has no naive_max_instances"
            )
        return Policy("naive", True, min(shape.min_instances, naive), naive)
    if name == "plan+burst":
        midpoint = round9((shape.c_scale_max + shape.queue_max_depth) / 2)
        burst = BurstStep(
            threshold=round9(curves.cloudwatch_value(midpoint)),
            factor=round9(shape.surge_ratio * shape.queue_max_depth / shape.c_scale_max),
            cooldown_s=shape.start_delay_s,
        )
        return Policy("plan+burst", True, shape.min_instances, shape.max_instances, burst)
    if match := re.fullmatch(r"fixed:(\d+)", name):
        count = int(match.group(1))
        if count < 1:
            raise TtsBenchError("policy fixed:N needs N ≥ 1")
        if count > MAX_FIXED_INSTANCES:
            raise TtsBenchError(f"policy fixed:N needs N ≤ {MAX_FIXED_INSTANCES:,}")
        return Policy(name, False, count, count)
    raise TtsBenchError(f"unknown policy {name!r}; use one of {', '.join(POLICY_NAMES)}")
