"""EndpointAutoscaling: the plan's scaling policy on one endpoint variant (SPEC §6, §6a).

Every construct comes from the plan's deploy shape (`planning.deploy.deploy_shape_of`): the
published rule's target tracking on the high-resolution concurrency metric (scale-in disabled)
with a step scale-in on its own alarm, or the fleet rule's target tracking on invocations per
instance (its own scale-in for small fleets), a burst step on the concurrency metric and a
scale-in step on a metric-math alarm that reads the fleet's size (`planning.aws.metric_math`). A plan made
with `--schedule` adds its scheduled actions (`planning.deploy.scheduled_actions_of`: a cron
per step, recurring with the plan's day, setting MinCapacity, in the time zone the plan states);
a plan without one deploys none. Every number comes from the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from tts_bench.artifacts.plan import (
    AfterOneLess,
    AlarmSpec,
    PlanArtifact,
    StepSpec,
    TargetTrackingSpec,
)
from tts_bench.deployment import (
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    TAG_IMAGE_DIGEST,
    TAG_MAX_BOUND,
    TAG_MIN_BOUND,
    TAG_MODEL_PACKAGE,
    TAG_PLAN_ID,
    TAG_PLAN_RULE,
    OperatorBounds,
    policy_name,
    resource_id,
    step_alarm_name,
)
from tts_bench.planning.aws import metric_math
from tts_bench.planning.deploy import deploy_shape_of, scheduled_actions_of
from tts_bench.telemetry import DIMENSIONS, SAGEMAKER_NAMESPACE

TT = aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs
TT_METRIC = aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs
STEP = aws.appautoscaling.PolicyStepScalingPolicyConfigurationArgs
STEP_ADJUSTMENT = aws.appautoscaling.PolicyStepScalingPolicyConfigurationStepAdjustmentArgs
TARGET_ACTION = aws.appautoscaling.ScheduledActionScalableTargetActionArgs
QUERY = aws.cloudwatch.MetricAlarmMetricQueryArgs
QUERY_METRIC = aws.cloudwatch.MetricAlarmMetricQueryMetricArgs


@dataclass(frozen=True)
class EndpointAutoscalingArgs:
    endpoint_name: str
    variant_name: str
    plan: PlanArtifact
    bounds: OperatorBounds
    image_digest: str | None  # None when a model package is deployed
    tags: dict[str, str]
    model_package: str | None = None


def deployed_tag(image_digest: str | None, model_package: str | None) -> dict[str, str]:
    """The tag naming what the stack deploys: its model package, else its image's digest."""
    if model_package is not None:
        return {TAG_MODEL_PACKAGE: model_package}
    return {TAG_IMAGE_DIGEST: image_digest or ""}


def _metric_queries(
    spec: AlarmSpec, math: AfterOneLess, endpoint: str, variant: str
) -> list[aws.cloudwatch.MetricAlarmMetricQueryArgs]:
    """The fleet-aware alarm's queries as `metric_math.queries` writes them, in the provider's
    types: the expression is built in one place only."""
    fleet = metric_math.of(math)
    queries = []
    for q in metric_math.queries(fleet, spec.threshold, endpoint, variant, spec.period_s):
        stat = q.get("MetricStat")
        metric = None
        if stat is not None:
            metric = QUERY_METRIC(
                namespace=stat["Metric"]["Namespace"],
                metric_name=stat["Metric"]["MetricName"],
                dimensions={d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]},
                period=stat["Period"],
                stat=stat["Stat"],
            )
        queries.append(
            QUERY(
                id=q["Id"],
                expression=q.get("Expression"),
                label=q.get("Label"),
                return_data=q["ReturnData"],
                metric=metric,
            )
        )
    return queries


def _bound(value: float | None) -> str | None:
    """Step bounds as the provider takes them: text, `0` rather than `0.0`, every digit the plan
    has (a burst's second step starts at 13.778576328, not 13.7786)."""
    return None if value is None else f"{value:.15g}"


class EndpointAutoscaling(pulumi.ComponentResource):
    """The scalable target (plan min/max clamped into the operator's bounds, tagged with the plan
    id, image digest and bounds), each scaling policy of the plan's deploy shape, a step
    policy with its alarm, and the plan's scheduled actions if it has a schedule."""

    def __init__(
        self, name: str, args: EndpointAutoscalingArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("speech:aws:EndpointAutoscaling", name, None, opts)
        plan, endpoint, variant = args.plan, args.endpoint_name, args.variant_name
        low, high = args.bounds.clamp(plan.min_instances, plan.max_instances)
        # Literal, not the endpoint's output: policies read it at preview.
        target_id = resource_id(endpoint, variant)

        self.target = aws.appautoscaling.Target(
            f"{name}-target",
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=SCALABLE_DIMENSION,
            resource_id=target_id,
            min_capacity=low,
            max_capacity=high,
            tags={
                **args.tags,
                TAG_PLAN_ID: plan.plan_id,
                TAG_PLAN_RULE: plan.rule,
                **deployed_tag(args.image_digest, args.model_package),
                TAG_MIN_BOUND: str(args.bounds.min_instances),
                TAG_MAX_BOUND: str(args.bounds.max_instances),
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.policies: dict[str, aws.appautoscaling.Policy] = {}
        self.alarms: dict[str, aws.cloudwatch.MetricAlarm] = {}
        for spec in deploy_shape_of(plan).policies:
            if isinstance(spec, TargetTrackingSpec):
                self.policies[spec.role] = self._tracking(name, args, spec)
            else:
                self.policies[spec.role], self.alarms[spec.role] = self._step(name, args, spec)
        self.scheduled_actions = [
            aws.appautoscaling.ScheduledAction(
                f"{name}-{action.name.removeprefix(f'{endpoint}-')}",
                name=action.name,
                service_namespace=SERVICE_NAMESPACE,
                scalable_dimension=SCALABLE_DIMENSION,
                resource_id=target_id,
                schedule=action.schedule,
                timezone=action.timezone,
                scalable_target_action=TARGET_ACTION(
                    min_capacity=action.min_capacity, max_capacity=action.max_capacity
                ),
                opts=self._after_target(),
            )
            for action in scheduled_actions_of(plan, args.bounds, endpoint, variant)
        ]
        self.target_tracking = next(
            (p for r, p in self.policies.items() if r.endswith("-target")), None
        )
        self.scale_in = self.policies.get("scale-in")
        self.scale_in_alarm = self.alarms.get("scale-in")
        self.min_capacity = low
        self.max_capacity = high
        self.register_outputs(
            {
                "resource_id": self.target.resource_id,
                "min_capacity": low,
                "max_capacity": high,
                "policy_arns": {role: p.arn for role, p in self.policies.items()},
            }
        )

    def _after_target(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, depends_on=[self.target])

    def _tracking(
        self, name: str, args: EndpointAutoscalingArgs, spec: TargetTrackingSpec
    ) -> aws.appautoscaling.Policy:
        return aws.appautoscaling.Policy(
            f"{name}-target-tracking",
            name=policy_name(args.endpoint_name, args.variant_name, spec.role),
            policy_type="TargetTrackingScaling",
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=SCALABLE_DIMENSION,
            resource_id=resource_id(args.endpoint_name, args.variant_name),
            target_tracking_scaling_policy_configuration=TT(
                target_value=spec.target_value,
                predefined_metric_specification=TT_METRIC(
                    predefined_metric_type=spec.predefined_metric
                ),
                disable_scale_in=spec.disable_scale_in,
                scale_out_cooldown=spec.scale_out_cooldown_s,
                scale_in_cooldown=spec.scale_in_cooldown_s,
            ),
            opts=self._after_target(),
        )

    def _step(
        self, name: str, args: EndpointAutoscalingArgs, spec: StepSpec
    ) -> tuple[aws.appautoscaling.Policy, aws.cloudwatch.MetricAlarm]:
        endpoint, variant, plan = args.endpoint_name, args.variant_name, args.plan
        policy = aws.appautoscaling.Policy(
            f"{name}-{spec.role}",
            name=policy_name(endpoint, variant, spec.role),
            policy_type="StepScaling",
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=SCALABLE_DIMENSION,
            resource_id=resource_id(endpoint, variant),
            step_scaling_policy_configuration=STEP(
                adjustment_type=spec.adjustment_type,
                cooldown=spec.cooldown_s,
                metric_aggregation_type=spec.metric_aggregation_type,
                min_adjustment_magnitude=spec.min_adjustment_magnitude,
                step_adjustments=[
                    STEP_ADJUSTMENT(
                        metric_interval_lower_bound=_bound(s.lower),
                        metric_interval_upper_bound=_bound(s.upper),
                        scaling_adjustment=s.adjustment,
                    )
                    for s in spec.steps
                ],
            ),
            opts=self._after_target(),
        )
        alarm = spec.alarm
        datapoints = alarm.datapoints_to_alarm
        math = alarm.after_one_less
        if math is None:
            reads = f"{alarm.metric} {alarm.statistic} ({alarm.period_s} s)"
            what: dict[str, Any] = {
                "namespace": SAGEMAKER_NAMESPACE,
                "metric_name": alarm.metric,
                "dimensions": dict(zip(DIMENSIONS, (endpoint, variant), strict=True)),
                "statistic": alarm.statistic,
                "period": alarm.period_s,
            }
        else:
            reads = (
                f"{alarm.metric} with one instance fewer, from Invocations / "
                f"{alarm.metric} ({alarm.statistic}, {alarm.period_s} s; from "
                f"{math.min_fleet} instances)"
            )
            what = {"metric_queries": _metric_queries(alarm, math, endpoint, variant)}
        metric_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-{spec.role}-alarm",
            name=step_alarm_name(endpoint, variant, spec.role),
            alarm_description=(
                f"{spec.role}: {reads} {alarm.comparison} {alarm.threshold:g} (plan {plan.plan_id})"
            ),
            evaluation_periods=alarm.evaluation_periods,
            # Unset means all of the evaluation periods, as CloudWatch defines it.
            datapoints_to_alarm=None if datapoints == alarm.evaluation_periods else datapoints,
            threshold=alarm.threshold,
            comparison_operator=alarm.comparison,
            treat_missing_data=alarm.treat_missing_data,
            alarm_actions=[policy.arn],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
            **what,
        )
        return policy, metric_alarm
