"""Build a deployment in the emulator the way the stack does, and bend it into drift cases.

moto cannot evaluate alarms and creates none for target tracking, so the target-tracking
policy's alarms are put explicitly (named as AWS names them) and states are set with
`set_alarm_state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from tts_bench.artifacts.plan import AlarmSpec, PlanArtifact
from tts_bench.deployment import (
    DEFAULT_VARIANT,
    SCALABLE_DIMENSION,
    SCALE_IN_ADJUSTMENT,
    SCALE_IN_COMPARISON,
    SCALE_IN_EVALUATION_PERIODS,
    SCALE_IN_PERIOD_S,
    SCALE_IN_STATISTIC,
    SERVICE_NAMESPACE,
    TARGET_TRACKING_EVALUATION_PERIODS,
    TARGET_TRACKING_METRIC,
    TARGET_TRACKING_PERIOD_S,
    TARGET_TRACKING_STATISTIC,
    resource_id,
    scale_in_alarm_name,
    scale_in_policy_name,
    target_tracking_policy_name,
)
from tts_bench.planning.aws import metric_math
from tts_bench.telemetry import (
    CONCURRENT_REQUESTS_PER_MODEL,
    ENV_MAX_QUEUE_DEPTH,
    SAGEMAKER_NAMESPACE,
)

REGION = "us-east-1"
ENDPOINT = "speech-kokoro-82m"
ROLE = "arn:aws:iam::123456789012:role/speech-sagemaker-execution"
IMAGE = (
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/speech-kokoro"
    "@sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced"
)


def fleet_queries(
    spec: AlarmSpec, endpoint: str = ENDPOINT, math: metric_math.FleetMath | None = None
) -> list[dict[str, Any]]:
    """An `after_one_less` alarm's `Metrics` as the stack deploys them (`math`: other
    parameters, for a hand-edited alarm)."""
    assert spec.after_one_less is not None
    plan_math = metric_math.of(spec.after_one_less)
    return metric_math.queries(
        math or plan_math, spec.threshold, endpoint, DEFAULT_VARIANT, spec.period_s
    )


@dataclass
class EmulatedAws:
    """boto3 clients on the emulator, for building and inspecting what the tests deploy."""

    url: str
    state_dir: Path
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = boto3.client(
                service, region_name=REGION, endpoint_url=self.url
            )
        return self._clients[service]

    # ------------------------------------------------------------------ building

    def endpoint(
        self,
        name: str = ENDPOINT,
        *,
        instances: int = 2,
        env: dict[str, str] | None = None,
        variants: tuple[str, ...] = (DEFAULT_VARIANT,),
        image: str = IMAGE,
    ) -> None:
        sm = self.client("sagemaker")
        sm.create_model(
            ModelName=f"{name}-model",
            ExecutionRoleArn=ROLE,
            PrimaryContainer={"Image": image, "Environment": env or {}},
        )
        sm.create_endpoint_config(
            EndpointConfigName=f"{name}-config",
            ProductionVariants=[
                {
                    "VariantName": variant,
                    "ModelName": f"{name}-model",
                    "InstanceType": "ml.g5.xlarge",
                    "InitialInstanceCount": instances,
                    "InitialVariantWeight": 1.0,
                }
                for variant in variants
            ],
        )
        sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")

    def target(
        self,
        endpoint: str = ENDPOINT,
        variant: str = DEFAULT_VARIANT,
        *,
        min_capacity: int | None = None,
        max_capacity: int | None = None,
        suspended: dict[str, bool] | None = None,
    ) -> None:
        settings: dict[str, Any] = {}
        if min_capacity is not None:
            settings["MinCapacity"] = min_capacity
        if max_capacity is not None:
            settings["MaxCapacity"] = max_capacity
        if suspended is not None:
            settings["SuspendedState"] = suspended
        self.client("application-autoscaling").register_scalable_target(
            ServiceNamespace=SERVICE_NAMESPACE,
            ResourceId=resource_id(endpoint, variant),
            ScalableDimension=SCALABLE_DIMENSION,
            **settings,
        )

    def tracking_policy(
        self,
        endpoint: str = ENDPOINT,
        *,
        target_value: float,
        scale_out_cooldown_s: int,
        name: str | None = None,
        statistic: str = TARGET_TRACKING_STATISTIC,
    ) -> str:
        arn = self.client("application-autoscaling").put_scaling_policy(
            PolicyName=name or target_tracking_policy_name(endpoint),
            ServiceNamespace=SERVICE_NAMESPACE,
            ResourceId=resource_id(endpoint),
            ScalableDimension=SCALABLE_DIMENSION,
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": target_value,
                "PredefinedMetricSpecification": {"PredefinedMetricType": TARGET_TRACKING_METRIC},
                "ScaleOutCooldown": scale_out_cooldown_s,
                "DisableScaleIn": True,
            },
        )["PolicyARN"]
        # What AWS would create for the policy and moto does not.
        self.alarm(
            f"TargetTracking-{resource_id(endpoint)}-AlarmHigh-0a1b",
            threshold=target_value,
            policy_arn=arn,
            endpoint=endpoint,
            period_s=TARGET_TRACKING_PERIOD_S,
            evaluation_periods=TARGET_TRACKING_EVALUATION_PERIODS,
            statistic=statistic,
            comparison="GreaterThanThreshold",
        )
        return str(arn)

    def step_policy(self, endpoint: str = ENDPOINT, *, cooldown_s: int) -> str:
        return str(
            self.client("application-autoscaling").put_scaling_policy(
                PolicyName=scale_in_policy_name(endpoint),
                ServiceNamespace=SERVICE_NAMESPACE,
                ResourceId=resource_id(endpoint),
                ScalableDimension=SCALABLE_DIMENSION,
                PolicyType="StepScaling",
                StepScalingPolicyConfiguration={
                    "AdjustmentType": "ChangeInCapacity",
                    "StepAdjustments": [
                        {"MetricIntervalUpperBound": 0.0, "ScalingAdjustment": SCALE_IN_ADJUSTMENT}
                    ],
                    "Cooldown": cooldown_s,
                    "MetricAggregationType": SCALE_IN_STATISTIC,
                },
            )["PolicyARN"]
        )

    def alarm(
        self,
        name: str,
        *,
        threshold: float,
        policy_arn: str,
        endpoint: str = ENDPOINT,
        period_s: int = SCALE_IN_PERIOD_S,
        evaluation_periods: int = SCALE_IN_EVALUATION_PERIODS,
        statistic: str = SCALE_IN_STATISTIC,
        comparison: str = SCALE_IN_COMPARISON,
        state: str = "OK",
    ) -> None:
        cw = self.client("cloudwatch")
        cw.put_metric_alarm(
            AlarmName=name,
            Namespace=SAGEMAKER_NAMESPACE,
            MetricName=CONCURRENT_REQUESTS_PER_MODEL,
            Dimensions=[
                {"Name": "EndpointName", "Value": endpoint},
                {"Name": "VariantName", "Value": DEFAULT_VARIANT},
            ],
            Statistic=statistic,
            Period=period_s,
            EvaluationPeriods=evaluation_periods,
            Threshold=threshold,
            ComparisonOperator=comparison,
            AlarmActions=[policy_arn],
        )
        self.alarm_state(name, state)

    def alarm_state(self, name: str, state: str) -> None:
        self.client("cloudwatch").set_alarm_state(
            AlarmName=name, StateValue=state, StateReason="set by the test"
        )

    def deploy(
        self,
        plan: PlanArtifact,
        *,
        endpoint: str = ENDPOINT,
        instances: int = 2,
        min_capacity: int | None = None,
        max_capacity: int | None = None,
        image: str = IMAGE,
    ) -> None:
        """The stack's shape for `plan`: endpoint, target, both policies, the scale-in alarm."""
        self.endpoint(
            endpoint,
            instances=instances,
            env={ENV_MAX_QUEUE_DEPTH: str(plan.queue_max_depth)},
            image=image,
        )
        self.target(
            endpoint,
            min_capacity=plan.min_instances if min_capacity is None else min_capacity,
            max_capacity=plan.max_instances if max_capacity is None else max_capacity,
        )
        self.tracking_policy(
            endpoint,
            target_value=plan.scaling_target_value,
            scale_out_cooldown_s=plan.scale_out_cooldown_s,
        )
        step = self.step_policy(endpoint, cooldown_s=plan.scale_in_cooldown_s)
        self.alarm(
            scale_in_alarm_name(endpoint),
            threshold=plan.scale_in_threshold,
            policy_arn=step,
            endpoint=endpoint,
        )

    def deploy_shape(
        self, plan: PlanArtifact, *, endpoint: str = ENDPOINT, edit: dict[str, Any] | None = None
    ) -> None:
        """Any plan's deploy shape as the stack and AWS make it: each policy, each step's alarm,
        and target tracking's own alarms; `edit` replaces request fields by role
        (`{"burst.alarm": {"Threshold": 1.0}}`, `{"invocations-target": {"ScaleInCooldown": 60}}`)."""
        from tts_bench.artifacts.plan import TargetTrackingSpec
        from tts_bench.deployment import policy_name, step_alarm_name
        from tts_bench.planning.deploy import deploy_shape_of

        edit = edit or {}
        self.endpoint(endpoint, instances=2, env={ENV_MAX_QUEUE_DEPTH: str(plan.queue_max_depth)})
        self.target(endpoint, min_capacity=plan.min_instances, max_capacity=plan.max_instances)
        rid = resource_id(endpoint)

        def alarm(name: str, spec: AlarmSpec, arn: str, changes: dict[str, Any]) -> None:
            reads: dict[str, Any] = {
                "Namespace": SAGEMAKER_NAMESPACE, "MetricName": spec.metric,
                "Dimensions": [{"Name": "EndpointName", "Value": endpoint},
                               {"Name": "VariantName", "Value": DEFAULT_VARIANT}],
                "Statistic": spec.statistic, "Period": spec.period_s,
            }  # fmt: skip
            if spec.after_one_less is not None:  # the stack's metric math, as the program sends it
                reads = {"Metrics": fleet_queries(spec, endpoint)}
            self.client("cloudwatch").put_metric_alarm(
                **{
                    "AlarmName": name, **reads,
                    "EvaluationPeriods": spec.evaluation_periods,
                    "DatapointsToAlarm": spec.datapoints_to_alarm, "Threshold": spec.threshold,
                    "ComparisonOperator": spec.comparison,
                    "TreatMissingData": spec.treat_missing_data, "AlarmActions": [arn],
                    **changes,
                }
            )  # fmt: skip

        for spec in deploy_shape_of(plan).policies:
            name = policy_name(endpoint, DEFAULT_VARIANT, spec.role)
            common = {
                "PolicyName": name, "ServiceNamespace": SERVICE_NAMESPACE, "ResourceId": rid,
                "ScalableDimension": SCALABLE_DIMENSION,
            }  # fmt: skip
            if isinstance(spec, TargetTrackingSpec):
                config: dict[str, Any] = {
                    "TargetValue": spec.target_value,
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": spec.predefined_metric
                    },
                    "ScaleOutCooldown": spec.scale_out_cooldown_s,
                    "DisableScaleIn": spec.disable_scale_in,
                }
                if spec.scale_in_cooldown_s is not None:
                    config["ScaleInCooldown"] = spec.scale_in_cooldown_s
                arn = self.client("application-autoscaling").put_scaling_policy(
                    **common, PolicyType="TargetTrackingScaling",
                    TargetTrackingScalingPolicyConfiguration=config | edit.get(spec.role, {}),
                )["PolicyARN"]  # fmt: skip
                for kind, spec_alarm in (
                    ("AlarmHigh", spec.high_alarm),
                    ("AlarmLow", spec.low_alarm),
                ):
                    if spec_alarm is not None:
                        key = f"{spec.role}.{kind}"
                        alarm(
                            f"TargetTracking-{rid}-{kind}-0a1b", spec_alarm, arn, edit.get(key, {})
                        )
                continue
            steps = [
                {"ScalingAdjustment": s.adjustment}
                | ({"MetricIntervalLowerBound": s.lower} if s.lower is not None else {})
                | ({"MetricIntervalUpperBound": s.upper} if s.upper is not None else {})
                for s in spec.steps
            ]
            config = {
                "AdjustmentType": spec.adjustment_type, "StepAdjustments": steps,
                "Cooldown": spec.cooldown_s, "MetricAggregationType": spec.metric_aggregation_type,
            }  # fmt: skip
            if spec.min_adjustment_magnitude is not None:
                config["MinAdjustmentMagnitude"] = spec.min_adjustment_magnitude
            arn = self.client("application-autoscaling").put_scaling_policy(
                **common, PolicyType="StepScaling",
                StepScalingPolicyConfiguration=config | edit.get(spec.role, {}),
            )["PolicyARN"]  # fmt: skip
            alarm(
                step_alarm_name(endpoint, DEFAULT_VARIANT, spec.role), spec.alarm, arn,
                edit.get(f"{spec.role}.alarm", {}),
            )  # fmt: skip

    def schedule(
        self,
        plan: PlanArtifact,
        *,
        endpoint: str = ENDPOINT,
        edit: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """The plan's scheduled actions as the stack deploys them (`edit` replaces request
        fields by action name), and the target's min at the step in effect now, as AWS leaves
        it once the last action ran."""
        from datetime import UTC, datetime

        from tts_bench.aws.validate import scheduled_min
        from tts_bench.planning.deploy import scheduled_actions_of

        aas = self.client("application-autoscaling")
        actions = scheduled_actions_of(plan, None, endpoint)
        for action in actions:
            aas.put_scheduled_action(
                **{
                    "ServiceNamespace": SERVICE_NAMESPACE, "ResourceId": resource_id(endpoint),
                    "ScalableDimension": SCALABLE_DIMENSION, "ScheduledActionName": action.name,
                    "Schedule": action.schedule, "Timezone": action.timezone,
                    "ScalableTargetAction": {"MinCapacity": action.min_capacity,
                                             "MaxCapacity": action.max_capacity},
                    **(edit or {}).get(action.name, {}),
                }
            )  # fmt: skip
        low = scheduled_min(actions, plan.min_instances, plan.max_instances, datetime.now(UTC))
        self.target(endpoint, min_capacity=low, max_capacity=plan.max_instances)

    # ------------------------------------------------------------------ reading

    def scaling(self, endpoint: str = ENDPOINT) -> dict[str, Any]:
        """min, max, suspended flags and desired count, as a test compares them."""
        targets = self.client("application-autoscaling").describe_scalable_targets(
            ServiceNamespace=SERVICE_NAMESPACE, ResourceIds=[resource_id(endpoint)]
        )["ScalableTargets"]
        variant = self.client("sagemaker").describe_endpoint(EndpointName=endpoint)[
            "ProductionVariants"
        ][0]
        target = targets[0] if targets else {}
        suspended = target.get("SuspendedState") or {}
        return {
            "min": target.get("MinCapacity"),
            "max": target.get("MaxCapacity"),
            "suspended": sorted(k for k, v in suspended.items() if v),
            "desired": variant["DesiredInstanceCount"],
        }
