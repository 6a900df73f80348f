"""The fleet rule: scaling levels stated as load per instance, deployed on a load-linear metric.

The published rule's thresholds are fractions of Q_max in concurrency, and a fleet's concurrency
is not proportional to its load: one instance with a flat X(n) holds ρ/(1 − ρ), a fleet under
least-outstanding routing holds under 1 per instance until it is nearly full. The fleet rule
starts from load instead (docs/plan.md states every step):

- λ_out = X(Q_max) · (1 − margin) / surge_ratio: at λ_out per instance a surge of the surge
  ratio still leaves each instance below what it serves at Q_max, with a margin for the load
  that keeps growing while new capacity comes: a day's diurnal between the plan's trough and
  peak grows, at its steepest, by (peak − trough)/(peak + trough) · 2π/day · T per planned
  T_total T, and never less than `FLEET_MARGIN_FLOOR` (tuned by simulation on small fleets,
  fixed here);
- deployed as target tracking on `SageMakerVariantInvocationsPerInstance`, whose datapoint is
  the requests per instance per minute by AWS's definition, at 60 · λ_out (times the ratio the
  ladder measured against the client's count): proportional sizing is then right at every fleet
  size, and it counts offered load, shed requests included;
- scale-in, on a fleet of `FLEET_SCALE_IN_MIN_FLEET` instances or more, is a step policy of
  the plan's own on a metric-math alarm that reads the fleet's size
  (`planning.aws.metric_math`): three one-minute datapoints of the invocations per instance
  the fleet would have with one instance fewer, below the target, remove k % where that is
  k % below it, so the survivors land at or under λ_out. Below that size it never breaches,
  and target tracking's own scale-in acts (below 90 % of the target for 15 minutes, to
  ceil(N · value / target), λ_in = 0.9 · λ_out): one instance is a large share of a small
  fleet, AWS rounds a smaller percentage up to one, and a small fleet's load grows fastest on
  a ramp. A step scale-in is not held back by target tracking; on the falling half of a day
  target tracking alone held a large fleet 7–14 % above its need;
- the metric is a standard one: its detection lag (3 one-minute datapoints and a minute's
  publication) is added to the measured T_total, and the scale-out cooldown covers the whole
  planned T_total, so no scale-out counts capacity that is still launching as serving;
- `FLEET_BURST` keeps the high-resolution concurrency metric as a burst step: one 10 s datapoint
  at the occupancy one instance holds at λ_out (or, where a pooled fleet holds more under the
  surge ratio's load, as a batching engine's does, at that) adds, at once, what a surge needs
  (`PercentChangeInCapacity`) and at least `FLEET_BURST_MIN_INSTANCES`. A fleet of a few
  instances pools little and reads that occupancy as its load nears λ_out, a large one only on
  its way to saturation; small fleets, whose load grows fastest in relative terms on a ramp,
  get the earliest warning and the largest relative step.

`c_scale_max` and `c_scale_min` of a fleet plan are the mean occupancy one instance holds at
λ_out and λ_in (the birth–death chain on X(n)): where the fleet rule acts, in the client
concurrency the published rule speaks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from tts_bench import deployment
from tts_bench.artifacts.cloudwatch import (
    INVOCATIONS_RATIO_STAT,
    LADDER_RATIO_STAT,
    CloudWatchUnits,
)
from tts_bench.artifacts.plan import (
    AfterOneLess,
    AlarmSpec,
    BurstLevels,
    DeployShape,
    FleetLevels,
    StepAdjustment,
    StepSpec,
    TargetTrackingSpec,
)
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.errors import RefusalError
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.birth_death import pooled_stationary, stationary_occupancy
from tts_bench.planning.curve import Curve, ratio_at
from tts_bench.planning.deploy import alarm_rule, tracking_spec
from tts_bench.planning.rounding import ceil9, round9
from tts_bench.planning.steps import (
    Basis,
    Fleet,
    PlanRequest,
    Thresholds,
    refuse_beyond_max_capacity,
)
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, SAGEMAKER_INVOCATIONS_PER_INSTANCE

# Tuned on simulated days (docs/simulation.md, `benchmarks/fleet_rule_tuning.py`); fixed here so
# that a plan re-derives without simulating. The floor guards days with little growth; no shape
# simulated so far sheds at 0, so it is a guard (2.5 % of instances), not a measured need.
FLEET_MARGIN_FLOOR: Final = 0.025
FLEET_BURST: Final = True
# The burst adds at least this many instances (MinAdjustmentMagnitude): tuned on ramps from one
# to twenty instances' worth of load in an hour, where a lone instance's load doubles within one
# launch; with it a fleet of one goes to four, the smallest that pools a ×1.25 surge at λ_out
# within the 0.01 % budget on the reference ladder (the surge_survival finding's floor).
FLEET_BURST_MIN_INSTANCES: Final = 3
# "A large fleet" for the burst threshold: the pooled chain's occupancy has converged by then
# (3.55 at 100 instances, 3.50 at 363 on the reference ladder under a ×1.25 surge).
POOLED_FLEET_INSTANCES: Final = 100
# The period the plan's peak and trough are a day's of (the margin's diurnal).
FLEET_DAY_S: Final = 86_400.0
# The step scale-in's smallest fleet (docs/simulation.md, "The fleet-aware scale-in"): tuned
# on the reference day and the rehearsal's ramps, where a step scale-in on fleets of 5–10
# removed what a rising load needed minutes later; from 20 one instance is 5 % or less.
FLEET_SCALE_IN_MIN_FLEET: Final = 20
FLEET_SCALE_IN_DATAPOINTS: Final = 3
FLEET_SCALE_IN_MAX_PERCENT: Final = 50  # the largest share one removal takes
FLEET_SCALE_IN_COOLDOWN_S: Final = 300  # AWS's default for a SageMaker variant
INVOCATIONS_STAT: Final = INVOCATIONS_RATIO_STAT


@dataclass(frozen=True)
class FleetDerivation:
    thresholds: Thresholds
    fleet: Fleet
    levels: FleetLevels
    shape: DeployShape


def invocations_units(qmax: QmaxArtifact) -> tuple[CloudWatchUnits, str]:
    """InvocationsPerInstance against the client's request count: the smallest ratio any rung
    measured (a count per request does not depend on the load, and the smallest makes the
    target fire earliest); else 1.0: locally (no CloudWatch), by AWS's definition for a
    reference run, and `unmeasured` for a SageMaker ladder that held no two whole minutes (the
    cw_ratio finding warns)."""
    stat = INVOCATIONS_STAT
    measured = [
        (r.concurrency, ratio)
        for r in [*qmax.rungs, *qmax.verification]
        if r.usable and (ratio := r.cloudwatch_ratios.get(stat.key)) is not None
    ]
    if measured:
        at, ratio = min(measured, key=lambda m: m[1])
        rule, where = "smallest-rung", f"the smallest of {len(measured)} rungs (c={at})"
    elif qmax.fingerprint is not None and qmax.fingerprint.transport.is_local:
        ratio, rule, where = 1.0, "local-no-cloudwatch", "local: no CloudWatch"
    elif qmax.provenance.kind == "reference":
        ratio, rule = 1.0, "by-definition"
        where = "AWS's definition: each request adds 1/N; a reference run has no join"
    else:
        ratio, rule, where = 1.0, "unmeasured", "nothing measured"
    units = CloudWatchUnits(
        metric=stat.metric, statistic=stat.statistic, period_s=stat.period_s,
        cw_ratio=ratio, ratio_rule=rule,  # type: ignore[arg-type]
    )  # fmt: skip
    return units, where


def burst_occupancy(x_curve: Curve, q_max: int, scale_out_rps: float, surge_rps: float) -> float:
    """Where the burst fires, in client concurrency per instance: what one instance holds at λ_out,
    unless a large pooled fleet holds more under the surge ratio's load (a batching engine's
    occupancy follows its load at any fleet size), and at least one request in flight."""
    alone = stationary_occupancy(scale_out_rps, x_curve.at, q_max)
    pooled = pooled_stationary(POOLED_FLEET_INSTANCES, surge_rps, x_curve.at, q_max)
    return round9(max(1.0, alone, pooled.mean_occupancy))


def _burst(
    qmax: QmaxArtifact, x_curve: Curve, q_max: int, surge_rps: float, scale_out_rps: float,
    cooldown_s: int,
) -> BurstLevels:  # fmt: skip
    occupancy = burst_occupancy(x_curve, q_max, scale_out_rps, surge_rps)
    reading = ratio_at(qmax, LADDER_RATIO_STAT, occupancy, "burst", 0.0)
    ratio, rule = (reading.ratio, reading.rule) if reading else (1.0, "local-no-cloudwatch")
    if reading is None and not (qmax.fingerprint and qmax.fingerprint.transport.is_local):
        rule = "unmeasured"
    units = CloudWatchUnits(
        statistic=LADDER_RATIO_STAT.statistic, period_s=LADDER_RATIO_STAT.period_s,
        cw_ratio=ratio, ratio_rule=rule,  # type: ignore[arg-type]
    )  # fmt: skip
    # Near Q_max the concurrency metric cannot tell how much load there is: add what brings a
    # fleet serving X(Q_max) per instance back to λ_out; target tracking on the invocations,
    # which count shed requests too, sizes the rest from the offered load a minute later.
    percent = ceil9(100 * (x_curve(q_max) / scale_out_rps - 1))
    return BurstLevels(
        occupancy=occupancy,
        threshold=finite(units.of(occupancy), "the burst threshold", units.ratio_rule),
        units=units,
        percent=max(1, percent),
        cooldown_s=cooldown_s,
    )


def saturation_threshold(
    qmax: QmaxArtifact, x_curve: Curve, q_max: int, surge_rps: float, burst: BurstLevels
) -> float | None:
    """The burst's second step, in CloudWatch units: the occupancy one instance holds under the
    surge ratio's load, where a fleet is on its way to shedding (None: not above the first)."""
    occupancy = round9(stationary_occupancy(surge_rps, x_curve.at, q_max))
    if occupancy <= burst.occupancy:
        return None
    reading = ratio_at(qmax, LADDER_RATIO_STAT, occupancy, "burst", 0.0)
    ratio = reading.ratio if reading else burst.units.cw_ratio
    return finite(round9(occupancy * ratio), "the burst's saturation step", burst.units.ratio_rule)


def _burst_step(burst: BurstLevels, saturation: float | None) -> StepSpec:
    """One step from the burst threshold; from `saturation` on, a second that adds the first's
    percentage again on top of it. Application Auto Scaling lets a step that asks for more act
    within the cooldown of the first, so a fleet the first step did not carry through a ramp gets
    a second push when it saturates instead of waiting out the cooldown."""
    steps = [StepAdjustment(lower=0.0, upper=None, adjustment=burst.percent)]
    if saturation is not None:
        twice = ceil9(100 * ((1 + burst.percent / 100) ** 2 - 1))
        edge = round9(saturation - burst.threshold)
        steps = [
            StepAdjustment(lower=0.0, upper=edge, adjustment=burst.percent),
            StepAdjustment(lower=edge, upper=None, adjustment=twice),
        ]
    return StepSpec(
        role="burst",
        adjustment_type="PercentChangeInCapacity",
        steps=steps,
        cooldown_s=burst.cooldown_s,
        metric_aggregation_type="Maximum",
        min_adjustment_magnitude=FLEET_BURST_MIN_INSTANCES,
        alarm=AlarmSpec(
            metric=CONCURRENT_REQUESTS_PER_MODEL,
            statistic=burst.units.statistic,
            period_s=burst.units.period_s,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            comparison="GreaterThanOrEqualToThreshold",
            threshold=burst.threshold,
            treat_missing_data="missing",
        ),
    )


def fleet_levels(
    basis: Basis, request: PlanRequest, qmax: QmaxArtifact, x_curve: Curve
) -> tuple[FleetLevels, str]:
    """λ_out, λ_in, the target in CloudWatch units, the planned T_total and the burst; and
    where the target's ratio came from (for the cw_ratio finding)."""
    surge = request.surge_ratio
    x_q_max = x_curve(basis.q_max)
    if x_q_max <= 0:
        raise RefusalError(
            f"the ladder measured no throughput at Q_max {basis.q_max}: the fleet rule has no load "
            "level to scale at; re-run the ladder (or plan with --rule published to see why)"
        )
    detection_lag_s = (
        tracking_lag_s() if basis.measured_lag_s is None else round9(basis.measured_lag_s)
    )
    planned_total_s = round9(basis.launch_s + detection_lag_s)
    margin = fleet_margin(request, planned_total_s)
    scale_out_rps = round9(x_q_max * (1 - margin) / surge)
    units, where = invocations_units(qmax)
    # The metric's datapoint is a count over its period: λ_out × period, in its units.
    target = finite(units.of(scale_out_rps * units.period_s), "the target", units.ratio_rule)
    burst = None
    if FLEET_BURST:
        burst = _burst(qmax, x_curve, basis.q_max, surge * scale_out_rps, scale_out_rps,
                       ceil9(planned_total_s))  # fmt: skip
    levels = FleetLevels(
        x_q_max_rps=round9(x_q_max),
        surge_ratio=surge,
        margin=margin,
        scale_out_rps=scale_out_rps,
        low_alarm_ratio=aws_scaling.TRACKING_LOW_RATIO,
        scale_in_rps=round9(aws_scaling.TRACKING_LOW_RATIO * scale_out_rps),
        invocations_units=units,
        target_invocations_per_minute=target,
        detection_lag_s=detection_lag_s,
        launch_s=basis.launch_s,
        planned_total_s=planned_total_s,
        burst=burst,
    )
    return levels, where


def tracking_lag_s() -> float:
    """Target tracking's detection lag on the invocations metric: its AlarmHigh's datapoints ×
    the period, plus the publication delay (aws_scaling); an organic ttotal may measure it."""
    high, _ = aws_scaling.tracking_alarms(aws_scaling.INVOCATIONS_TRACKING, 1.0, False)
    return round9(high.detection_s)


def scale_in_alarm(target: float) -> AlarmSpec:
    """Three one-minute datapoints of the invocations per instance with one instance fewer
    below the target, on a fleet of `FLEET_SCALE_IN_MIN_FLEET` or more (`AfterOneLess`)."""
    return AlarmSpec(
        metric=SAGEMAKER_INVOCATIONS_PER_INSTANCE,
        statistic="Sum",
        period_s=aws_scaling.STANDARD_PERIOD_S,
        evaluation_periods=FLEET_SCALE_IN_DATAPOINTS,
        datapoints_to_alarm=FLEET_SCALE_IN_DATAPOINTS,
        comparison="LessThanThreshold",
        threshold=target,
        treat_missing_data="missing",
        after_one_less=AfterOneLess(min_fleet=FLEET_SCALE_IN_MIN_FLEET),
    )


def scale_in_cooldown_s() -> int:
    """The plan's one scale-in cooldown, the step's and target tracking's: AWS's default for a
    SageMaker variant, which is above the step alarm's own detection (so its next removal reads
    only datapoints taken after the last). The detection alone (240 s) let target tracking's
    second removal on a fleet of 1-5 land just before a rise: over 20 seeds of the 1-5 instance
    day it shed 113 requests a day where 300 s sheds 11, and the reference day is 4,408
    instance-hours either way (docs/simulation.md)."""
    alarm = alarm_rule("scale-in", scale_in_alarm(1.0))
    return max(FLEET_SCALE_IN_COOLDOWN_S, ceil9(alarm.detection_s))


def _scale_in_step(target: float) -> StepSpec:
    """Remove k % where the value is k % below the target (PercentChangeInCapacity, rounded
    down above one instance): the survivors land at or under it."""
    top = FLEET_SCALE_IN_MAX_PERCENT
    steps = [
        StepAdjustment(
            lower=None if k == top else round9(-k * target / 100),
            upper=round9(-(k - 1) * target / 100),
            adjustment=-k,
        )
        for k in range(1, top + 1)
    ]
    return StepSpec(
        role="scale-in",
        adjustment_type="PercentChangeInCapacity",
        steps=steps,
        cooldown_s=scale_in_cooldown_s(),
        metric_aggregation_type="Average",
        alarm=scale_in_alarm(target),
    )


def derive_fleet(
    basis: Basis, request: PlanRequest, qmax: QmaxArtifact, x_curve: Curve
) -> FleetDerivation:
    """Levels, thresholds, cooldowns, fleet bounds and the deploy shape of the fleet rule."""
    levels, where = fleet_levels(basis, request, qmax, x_curve)
    target, units = levels.target_invocations_per_minute, levels.invocations_units
    scale_out_cooldown_s = ceil9(levels.planned_total_s)
    thresholds = Thresholds(
        c_scale_max=round9(stationary_occupancy(levels.scale_out_rps, x_curve.at, basis.q_max)),
        c_scale_min=round9(stationary_occupancy(levels.scale_in_rps, x_curve.at, basis.q_max)),
        w_max_s=round9(request.slo_ms / 1000 - basis.s_p95),
        target_units=units,
        scale_in_units=units,
        target_ratio_from=where,
        scale_in_ratio_from=where,
        scaling_target_value=target,
        scale_in_threshold=target,
        scale_out_cooldown_s=scale_out_cooldown_s,
        scale_in_cooldown_s=scale_in_cooldown_s(),
    )
    tracking = tracking_spec(
        "invocations-target",
        deployment.INVOCATIONS_TRACKING_METRIC,
        target,
        disable_scale_in=False,
        scale_out_cooldown_s=scale_out_cooldown_s,
        scale_in_cooldown_s=scale_in_cooldown_s(),
    )
    policies: list[TargetTrackingSpec | StepSpec] = [tracking, _scale_in_step(target)]
    if levels.burst is not None:
        surge_rps = request.surge_ratio * levels.scale_out_rps
        saturation = saturation_threshold(qmax, x_curve, basis.q_max, surge_rps, levels.burst)
        policies.append(_burst_step(levels.burst, saturation))
    shape = DeployShape(policies=policies, launch_s=basis.launch_s, sizing_rps=levels.scale_out_rps)
    return FleetDerivation(
        thresholds, size_fleet(basis, request, levels.scale_out_rps), levels, shape
    )


def finite(value: float, what: str, rule: str) -> float:
    """A threshold in CloudWatch units that overflowed is no threshold: refuse in one line."""
    if not math.isfinite(value):
        raise RefusalError(
            f"{what} in CloudWatch units is not a finite number (ratio by {rule}): the qmax "
            "artifact's CloudWatch ratios are not measurements; re-run the ladder"
        )
    return value


def fleet_margin(request: PlanRequest, planned_total_s: float) -> float:
    """The load a day's diurnal between the trough and the peak adds, at its steepest, during
    one planned T_total, as a share of the load there; at least `FLEET_MARGIN_FLOOR`."""
    spread = request.peak_rps - request.trough_rps
    growth = (
        spread
        / (request.peak_rps + request.trough_rps)
        * 2
        * math.pi
        / FLEET_DAY_S
        * planned_total_s
        if spread > 0
        else 0.0
    )
    return round9(min(max(FLEET_MARGIN_FLOOR, growth), 0.5))


def size_fleet(basis: Basis, request: PlanRequest, scale_out_rps: float) -> Fleet:
    """Instances held at λ_out each: the trough and the peak at the scale-out level, so the
    surge headroom holds at both ends; the published formula's figure beside them."""
    published_c_scale_max = round9((1 - basis.h) * basis.q_max)
    refuse_beyond_max_capacity(request, scale_out_rps)
    min_instances = max(request.min_floor, ceil9(request.trough_rps / scale_out_rps))
    max_instances = max(min_instances, ceil9(request.peak_rps / scale_out_rps))
    naive = ceil9(request.peak_rps * basis.s_mean / published_c_scale_max)
    return Fleet(scale_out_rps, min_instances, max_instances, max(min_instances, naive))
