"""The deployed scaling settings of a plan, read in one place.

The plan artifact holds the thresholds, cooldowns and bounds; `tts_bench.deployment` holds
what the Pulumi program fixes around them (metric periods, datapoints, the scale-in statistic).
`scaling_shape` is the only reader of both here, so when the plan starts recording the
scale-in alarm's statistic and period itself (issue 18), only this function changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tts_bench import deployment
from tts_bench.artifacts.schema import PlanArtifact


@dataclass(frozen=True)
class ScalingShape:
    """Target tracking (scale-out only) plus a step scale-in, as deployed (SPEC §6)."""

    metric_period_s: float  # the high-resolution metric: one datapoint per period, Maximum
    target_value: float  # CloudWatch units
    target_datapoints: int  # consecutive datapoints above the target before scaling out
    scale_out_cooldown_s: float
    scale_in_threshold: float  # CloudWatch units of the scale-in alarm's statistic
    scale_in_statistic: Literal["Average", "Maximum"]
    scale_in_period_s: float
    scale_in_datapoints: int
    scale_in_step: int  # instances removed per alarm action (negative)
    scale_in_cooldown_s: float
    min_instances: int
    max_instances: int
    queue_max_depth: int
    start_delay_s: float  # planned T_total: alarm to serving
    c_scale_max: float
    surge_ratio: float


def scaling_shape(plan: PlanArtifact) -> ScalingShape:
    statistic = deployment.SCALE_IN_STATISTIC
    if statistic not in ("Average", "Maximum"):
        raise ValueError(f"the scale-in alarm's statistic {statistic!r} is not simulated")
    return ScalingShape(
        metric_period_s=float(deployment.TARGET_TRACKING_PERIOD_S),
        target_value=plan.scaling_target_value,
        target_datapoints=deployment.TARGET_TRACKING_EVALUATION_PERIODS,
        scale_out_cooldown_s=float(plan.scale_out_cooldown_s),
        scale_in_threshold=plan.scale_in_threshold,
        scale_in_statistic=statistic,
        scale_in_period_s=float(deployment.SCALE_IN_PERIOD_S),
        scale_in_datapoints=deployment.SCALE_IN_EVALUATION_PERIODS,
        scale_in_step=deployment.SCALE_IN_ADJUSTMENT,
        scale_in_cooldown_s=float(plan.scale_in_cooldown_s),
        min_instances=plan.min_instances,
        max_instances=plan.max_instances,
        queue_max_depth=plan.queue_max_depth,
        start_delay_s=plan.inputs.planned_total_s,
        c_scale_max=plan.c_scale_max,
        surge_ratio=plan.inputs.surge_ratio,
    )
