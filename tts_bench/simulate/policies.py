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
  most), at once, as a PercentChangeInCapacity step. It does not fire again until those
  instances serve and the metric has seen them (cooldown = T_total + one period); scale-in later
  returns what was not needed. Application Auto Scaling applies the larger of the policies'
  desired counts. A fleet plan deploys a burst step of its own, so `plan+burst` refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.errors import TtsBenchError
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.aws.scheduled import WEEK_S, ScheduledAction, due, held_at
from tts_bench.planning.deploy import scheduled_actions_of
from tts_bench.planning.rounding import ceil9, round9
from tts_bench.simulate.deploy_shape import ScalingShape
from tts_bench.simulate.service import ServiceCurves
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL

POLICY_NAMES = ("plan", "naive", "fixed:N", "plan+burst")
# The simulated run's time 0 on the schedule's clock: a Monday 00:00 UTC, so a schedule's crons
# (a weekly one's day of the week too) run as they would on a deployed target from that midnight.
DAY_ZERO_S = datetime(2026, 1, 5, tzinfo=UTC).timestamp()
# Instance counts are int64 in the fleet model and instance-seconds over a month must stay exact.
MAX_FIXED_INSTANCES = 1_000_000


@dataclass(frozen=True)
class Policy:
    name: str
    scales: bool  # False: a fixed fleet, no policy at all
    min_instances: int
    max_instances: int
    rules: tuple[aws_scaling.Rule, ...] = ()
    # The plan's scheduled actions as deployed (`planning.deploy.scheduled_actions_of`).
    schedule: tuple[ScheduledAction, ...] = ()

    def scheduled_min_at_start(self) -> int:
        """MinCapacity at time 0: what the schedule holds after a week of its runs before it."""
        if not self.schedule:
            return self.min_instances
        low, _ = held_at(
            self.schedule, self.min_instances, self.max_instances, DAY_ZERO_S - WEEK_S, DAY_ZERO_S
        )
        return low

    def scheduled_runs(self, after_s: float, until_s: float) -> list[tuple[float, int | None]]:
        """(run time, MinCapacity) of each scheduled run within (after_s, until_s], run seconds."""
        runs = due(self.schedule, DAY_ZERO_S + after_s, DAY_ZERO_S + until_s)
        return [(when - DAY_ZERO_S, action.min_capacity) for when, action in runs]


def burst_rule(shape: ScalingShape, curves: ServiceCurves) -> aws_scaling.StepRule:
    """The published plan's burst step (module docstring), as a step policy AWS would run."""
    midpoint = round9((shape.c_scale_max + shape.queue_max_depth) / 2)
    factor = shape.surge_ratio * shape.queue_max_depth / shape.c_scale_max
    alarm = aws_scaling.AlarmRule(
        "burst-alarm", CONCURRENT_REQUESTS_PER_MODEL, "Maximum", int(shape.metric_period_s),
        1, 1, round9(curves.cloudwatch_value(midpoint)), "GreaterThanOrEqualToThreshold",
        "missing",
    )  # fmt: skip
    return aws_scaling.StepRule(
        "burst",
        "PercentChangeInCapacity",
        (aws_scaling.Step(0.0, None, ceil9(100 * (factor - 1))),),
        # Until its instances serve and the 10 s metric has seen them.
        shape.start_delay_s + shape.metric_period_s,
        alarm,
        1,
        "Maximum",
    )


def parse_policy(
    name: str, plan: PlanArtifact, shape: ScalingShape, curves: ServiceCurves
) -> Policy:
    """One `--policy` value; an unknown one is a one-line `TtsBenchError`."""
    if name == "plan":
        schedule = scheduled_actions_of(plan, None, "simulated")
        return Policy("plan", True, shape.min_instances, shape.max_instances, shape.rules, schedule)
    if name == "naive":
        sizing = plan.finding("fleet_sizing")
        naive = sizing.figure("naive_max_instances") if sizing else None
        if not isinstance(naive, int):
            raise TtsBenchError(
                "policy naive: the plan's fleet_sizing finding has no naive_max_instances"
            )
        return Policy("naive", True, min(shape.min_instances, naive), naive, shape.rules)
    if name == "plan+burst":
        if any(r.policy_name == "burst" for r in shape.rules):
            raise TtsBenchError(
                "policy plan+burst: this plan deploys a burst step of its own; use plan"
            )
        rules = (*shape.rules, burst_rule(shape, curves))
        return Policy("plan+burst", True, shape.min_instances, shape.max_instances, rules)
    if match := re.fullmatch(r"fixed:(\d+)", name):
        count = int(match.group(1))
        if count < 1:
            raise TtsBenchError("policy fixed:N needs N ≥ 1")
        if count > MAX_FIXED_INSTANCES:
            raise TtsBenchError(f"policy fixed:N needs N ≤ {MAX_FIXED_INSTANCES:,}")
        return Policy(name, False, count, count)
    raise TtsBenchError(f"unknown policy {name!r}; use one of {', '.join(POLICY_NAMES)}")
