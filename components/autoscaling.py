"""EndpointAutoscaling: the plan's scaling policy on one endpoint variant (SPEC §6 deploy shape).

Scale out by target tracking on the high-resolution concurrency metric at the plan's target,
with scale-in disabled; scale in by a step policy that removes one instance when the metric stays
at or below the plan's threshold, read with the statistic and period the plan records for it
(the units its ratio was measured in). Every number comes from the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from tts_bench.artifacts.schema import PlanArtifact
from tts_bench.deployment import (
    SCALABLE_DIMENSION,
    SCALE_IN_ADJUSTMENT,
    SCALE_IN_COMPARISON,
    SCALE_IN_EVALUATION_PERIODS,
    SERVICE_NAMESPACE,
    TAG_IMAGE_DIGEST,
    TAG_MAX_BOUND,
    TAG_MIN_BOUND,
    TAG_PLAN_ID,
    TARGET_TRACKING_METRIC,
    OperatorBounds,
    resource_id,
    scale_in_alarm_name,
    scale_in_policy_name,
    target_tracking_policy_name,
)
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, DIMENSIONS, SAGEMAKER_NAMESPACE


@dataclass(frozen=True)
class EndpointAutoscalingArgs:
    endpoint_name: str
    variant_name: str
    plan: PlanArtifact
    bounds: OperatorBounds
    image_digest: str
    tags: dict[str, str]


class EndpointAutoscaling(pulumi.ComponentResource):
    """The scalable target (plan min/max clamped into the operator's bounds, tagged with the plan
    id, image digest and bounds), the target-tracking policy, and the step scale-in policy with
    its alarm."""

    def __init__(
        self, name: str, args: EndpointAutoscalingArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("speech:aws:EndpointAutoscaling", name, None, opts)
        plan, endpoint, variant = args.plan, args.endpoint_name, args.variant_name
        units = plan.scale_in_units
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
                TAG_IMAGE_DIGEST: args.image_digest,
                TAG_MIN_BOUND: str(args.bounds.min_instances),
                TAG_MAX_BOUND: str(args.bounds.max_instances),
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        after_target = pulumi.ResourceOptions(parent=self, depends_on=[self.target])
        self.target_tracking = aws.appautoscaling.Policy(
            f"{name}-target-tracking",
            name=target_tracking_policy_name(endpoint, variant),
            policy_type="TargetTrackingScaling",
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=SCALABLE_DIMENSION,
            resource_id=target_id,
            target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
                target_value=plan.scaling_target_value,
                predefined_metric_specification=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                    predefined_metric_type=TARGET_TRACKING_METRIC
                ),
                disable_scale_in=True,
                scale_out_cooldown=plan.scale_out_cooldown_s,
            ),
            opts=after_target,
        )
        self.scale_in = aws.appautoscaling.Policy(
            f"{name}-scale-in",
            name=scale_in_policy_name(endpoint, variant),
            policy_type="StepScaling",
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=SCALABLE_DIMENSION,
            resource_id=target_id,
            step_scaling_policy_configuration=aws.appautoscaling.PolicyStepScalingPolicyConfigurationArgs(
                adjustment_type="ChangeInCapacity",
                cooldown=plan.scale_in_cooldown_s,
                metric_aggregation_type=units.statistic,
                step_adjustments=[
                    aws.appautoscaling.PolicyStepScalingPolicyConfigurationStepAdjustmentArgs(
                        metric_interval_upper_bound="0", scaling_adjustment=SCALE_IN_ADJUSTMENT
                    )
                ],
            ),
            opts=after_target,
        )
        self.scale_in_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-scale-in-alarm",
            name=scale_in_alarm_name(endpoint, variant),
            alarm_description=(
                f"Remove one instance: {CONCURRENT_REQUESTS_PER_MODEL} {units.statistic} "
                f"({units.period_s} s) <= {plan.scale_in_threshold:g} (plan {plan.plan_id})"
            ),
            namespace=SAGEMAKER_NAMESPACE,
            metric_name=CONCURRENT_REQUESTS_PER_MODEL,
            dimensions=dict(zip(DIMENSIONS, (endpoint, variant), strict=True)),
            statistic=units.statistic,
            period=units.period_s,
            evaluation_periods=SCALE_IN_EVALUATION_PERIODS,
            threshold=plan.scale_in_threshold,
            comparison_operator=SCALE_IN_COMPARISON,
            # An idle variant publishes no concurrency at all: that is low concurrency.
            treat_missing_data="breaching",
            alarm_actions=[self.scale_in.arn],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.min_capacity = low
        self.max_capacity = high
        self.register_outputs(
            {
                "resource_id": self.target.resource_id,
                "min_capacity": low,
                "max_capacity": high,
                "target_tracking_policy_arn": self.target_tracking.arn,
                "scale_in_policy_arn": self.scale_in.arn,
            }
        )
