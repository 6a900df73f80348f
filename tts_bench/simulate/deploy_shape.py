"""The deployed scaling settings of a plan, read in one place: every one from the plan.

`scaling_shape` reads the plan's deploy shape (`planning.deploy.deploy_shape_of`: a version 1
plan's is the published shape its fields describe) into the `aws_scaling` rules both models
apply, and refuses, in one line, a construct the simulation does not model.
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_bench.artifacts.plan import AlarmSpec, DeployShape, PlanArtifact
from tts_bench.errors import TtsBenchError
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics
from tts_bench.planning.deploy import deploy_shape_of, engine_rules
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, SAGEMAKER_INVOCATIONS_PER_INSTANCE

METRIC_PERIOD_S = aws_scaling.METRIC_PERIOD_S
# What the simulation can publish: the concurrency metric as its 10 s Maximum (the measured
# sensor), the invocations per instance as their Sum.
MODELLED_STATISTICS = {
    CONCURRENT_REQUESTS_PER_MODEL: "Maximum",
    SAGEMAKER_INVOCATIONS_PER_INSTANCE: "Sum",
}
MODELLED_MISSING = ("missing", "breaching", "notBreaching")


class UnmodelledConstruct(TtsBenchError):
    """The plan deploys something the simulation does not model."""


@dataclass(frozen=True)
class ScalingShape:
    """The policies as deployed, plus what else a simulated fleet needs from the plan."""

    rules: tuple[aws_scaling.Rule, ...]
    metric_period_s: float  # one datapoint per metric per 10 s window
    min_instances: int
    max_instances: int
    queue_max_depth: int
    start_delay_s: float  # desired count set → serving (the ttotal's measured total)
    sizing_rps: float  # per instance: how the fleet is sized at the start
    surge_hold_s: float  # how long a synthetic surge lasts: the ttotal's planned total
    c_scale_max: float
    surge_ratio: float
    semantics: AwsSemantics = DOCUMENTED  # the reading of what AWS leaves open

    @property
    def alarms(self) -> tuple[aws_scaling.AlarmRule, ...]:
        return aws_scaling.ScalingEngine(self.rules, self.semantics).alarms


def _check_alarm(role: str, alarm: AlarmSpec) -> None:
    wanted = MODELLED_STATISTICS.get(alarm.metric)
    if wanted is None or alarm.statistic != wanted:
        raise UnmodelledConstruct(
            f"the plan's {role} alarm reads {alarm.metric} {alarm.statistic}; the simulation "
            f"models only {', '.join(f'{m} {s}' for m, s in MODELLED_STATISTICS.items())}"
        )
    if alarm.period_s % METRIC_PERIOD_S:
        raise UnmodelledConstruct(
            f"the plan's {role} alarm has a {alarm.period_s} s period; the simulation models "
            f"multiples of the {METRIC_PERIOD_S} s metric period"
        )
    if alarm.treat_missing_data not in MODELLED_MISSING:
        raise UnmodelledConstruct(
            f"the plan's {role} alarm treats missing data as {alarm.treat_missing_data}; "
            f"the simulation models {', '.join(MODELLED_MISSING)}"
        )


def check_modelled(shape: DeployShape) -> None:
    """Refuse, in one line, a construct the simulation does not model."""
    for policy in shape.policies:
        alarms = (
            [policy.high_alarm, *([policy.low_alarm] if policy.low_alarm else [])]
            if policy.kind == "target-tracking"
            else [policy.alarm]
        )
        for alarm in alarms:
            _check_alarm(policy.role, alarm)


def scaling_shape(plan: PlanArtifact, semantics: AwsSemantics = DOCUMENTED) -> ScalingShape:
    """The plan's scaling as AWS runs it under `semantics` (target tracking's alarms are
    Application Auto Scaling's own, built by its reading, whatever the plan recorded)."""
    shape = deploy_shape_of(plan)
    check_modelled(shape)
    return ScalingShape(
        semantics=semantics,
        rules=engine_rules(shape, semantics=semantics),
        metric_period_s=float(METRIC_PERIOD_S),
        min_instances=plan.min_instances,
        max_instances=plan.max_instances,
        queue_max_depth=plan.queue_max_depth,
        start_delay_s=shape.launch_s,
        sizing_rps=shape.sizing_rps,
        surge_hold_s=plan.inputs.planned_total_s,
        c_scale_max=plan.c_scale_max,
        surge_ratio=plan.inputs.surge_ratio,
    )
