"""What is deployed, as a typed snapshot, and the thin reader that builds it with boto3.

`drift`, `validate` and `freeze` reason over `DeployedSnapshot` (pure rules, testable with
literal data); `read_snapshot` is the only place that turns SageMaker, Application Auto
Scaling and CloudWatch answers into it. The reader makes no change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from tts_bench.aws.session import AwsSession, EndpointNotFoundError
from tts_bench.deployment import (
    DEFAULT_VARIANT,
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    parse_resource_id,
    resource_id,
)
from tts_bench.planning.aws import metric_math


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuspendedState(_Frozen):
    """Application Auto Scaling's SuspendedState of a scalable target."""

    dynamic_in: bool = False
    dynamic_out: bool = False
    scheduled: bool = False

    @classmethod
    def all(cls, value: bool) -> SuspendedState:
        return cls(dynamic_in=value, dynamic_out=value, scheduled=value)

    @classmethod
    def from_api(cls, raw: dict[str, Any] | None) -> SuspendedState:
        raw = raw or {}
        return cls(
            dynamic_in=bool(raw.get("DynamicScalingInSuspended", False)),
            dynamic_out=bool(raw.get("DynamicScalingOutSuspended", False)),
            scheduled=bool(raw.get("ScheduledScalingSuspended", False)),
        )

    def to_api(self) -> dict[str, bool]:
        return {
            "DynamicScalingInSuspended": self.dynamic_in,
            "DynamicScalingOutSuspended": self.dynamic_out,
            "ScheduledScalingSuspended": self.scheduled,
        }

    @property
    def any(self) -> bool:
        return self.dynamic_in or self.dynamic_out or self.scheduled

    def describe(self) -> str:
        names = [
            name
            for name, on in (
                ("dynamic scale-in", self.dynamic_in),
                ("dynamic scale-out", self.dynamic_out),
                ("scheduled scaling", self.scheduled),
            )
            if on
        ]
        return ", ".join(names) if names else "nothing"


class ScalableTarget(_Frozen):
    resource_id: str
    min_capacity: int
    max_capacity: int
    suspended: SuspendedState


class ScalingPolicy(_Frozen):
    """A scaling policy, reduced to the settings the plan decides."""

    name: str
    arn: str
    resource_id: str
    policy_type: str
    # Target tracking
    target_value: float | None = None
    predefined_metric: str | None = None
    scale_out_cooldown_s: int | None = None
    scale_in_disabled: bool | None = None
    scale_in_cooldown_s: int | None = None
    # Step scaling
    step_cooldown_s: int | None = None
    adjustment_type: str | None = None
    # (lower, upper, adjustment) of each step, bounds as numbers (None: open)
    step_adjustments: tuple[tuple[float | None, float | None, int], ...] = ()
    min_adjustment_magnitude: int | None = None
    alarm_names: tuple[str, ...] = ()


class DeployedScheduledAction(_Frozen):
    """A scheduled action on a scalable target (DescribeScheduledActions)."""

    name: str
    resource_id: str
    schedule: str
    timezone: str | None = None  # None: AWS's default, UTC
    min_capacity: int | None = None
    max_capacity: int | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None


class Alarm(_Frozen):
    """A CloudWatch alarm: on one metric, or (`metrics`) on metric-math queries."""

    name: str
    state: str
    state_updated_at: datetime | None
    threshold: float | None
    metric_name: str | None
    statistic: str | None = None  # None for an extended statistic (p95) or a metric query
    period_s: int | None
    evaluation_periods: int | None
    actions: tuple[str, ...]
    datapoints_to_alarm: int | None = None  # None: all of the evaluation periods
    comparison: str | None = None
    # Its metric queries as DescribeAlarms gives them (PutMetricAlarm's `Metrics`); empty for
    # an alarm on one metric.
    metrics: tuple[dict[str, Any], ...] = ()

    @property
    def datapoints(self) -> int | None:
        return self.datapoints_to_alarm or self.evaluation_periods

    @property
    def after_one_less(self) -> tuple[metric_math.FleetMath, int] | None:
        """The fleet-aware expression's parameters and period, when its queries are exactly
        what `metric_math.queries` writes; None otherwise (or for a plain alarm)."""
        return metric_math.parse(self.metrics) if self.metrics else None

    @property
    def returned_expression(self) -> str | None:
        """The expression of the query the alarm evaluates (None for a plain alarm)."""
        return metric_math.returned_expression(self.metrics) if self.metrics else None

    @property
    def reads(self) -> str | None:
        """The metric it reads, or the metrics its queries read."""
        names = [q["MetricStat"]["Metric"].get("MetricName") for q in self.metrics
                 if "MetricStat" in q]  # fmt: skip
        return " and ".join(str(n) for n in names) if names else self.metric_name


class Variant(_Frozen):
    name: str
    desired_instance_count: int | None
    current_instance_count: int | None
    weight: float
    instance_type: str | None
    model_name: str | None
    environment: dict[str, str]
    # What the Model runs: its container's image, or the model package it names (issue 39),
    # and whether it runs network-isolated (None: no Model was read).
    image: str | None = None
    model_package: str | None = None
    network_isolation: bool | None = None


class DeployedSnapshot(_Frozen):
    """One read of an endpoint and every SageMaker scaling resource in its region."""

    region: str
    endpoint: str
    endpoint_status: str
    variants: tuple[Variant, ...]
    targets: tuple[ScalableTarget, ...]
    policies: tuple[ScalingPolicy, ...]
    alarms: tuple[Alarm, ...]
    # Variants of the other endpoints that targets or policies point at; None: no such endpoint.
    other_endpoints: dict[str, tuple[str, ...] | None]
    read_at: datetime
    scheduled_actions: tuple[DeployedScheduledAction, ...] = ()

    def variant(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)

    def target(self, variant: str = DEFAULT_VARIANT) -> ScalableTarget | None:
        rid = resource_id(self.endpoint, variant)
        return next((t for t in self.targets if t.resource_id == rid), None)

    def policies_on(self, variant: str = DEFAULT_VARIANT) -> tuple[ScalingPolicy, ...]:
        rid = resource_id(self.endpoint, variant)
        return tuple(p for p in self.policies if p.resource_id == rid)

    def policy(self, name: str, variant: str = DEFAULT_VARIANT) -> ScalingPolicy | None:
        return next((p for p in self.policies_on(variant) if p.name == name), None)

    def scheduled_on(self, variant: str = DEFAULT_VARIANT) -> tuple[DeployedScheduledAction, ...]:
        rid = resource_id(self.endpoint, variant)
        return tuple(a for a in self.scheduled_actions if a.resource_id == rid)

    def alarms_of(self, policy: ScalingPolicy) -> tuple[Alarm, ...]:
        """Alarms that drive `policy`: listed on it, or naming its ARN among their actions."""
        return tuple(
            a for a in self.alarms if a.name in policy.alarm_names or policy.arn in a.actions
        )


# --------------------------------------------------------------------------- the reader


def _policy(raw: dict[str, Any]) -> ScalingPolicy:
    tracking = raw.get("TargetTrackingScalingPolicyConfiguration") or {}
    step = raw.get("StepScalingPolicyConfiguration") or {}
    metric = tracking.get("PredefinedMetricSpecification") or {}
    return ScalingPolicy(
        name=raw["PolicyName"],
        arn=raw["PolicyARN"],
        resource_id=raw["ResourceId"],
        policy_type=raw["PolicyType"],
        target_value=tracking.get("TargetValue"),
        predefined_metric=metric.get("PredefinedMetricType"),
        scale_out_cooldown_s=tracking.get("ScaleOutCooldown"),
        scale_in_disabled=tracking.get("DisableScaleIn") if tracking else None,
        scale_in_cooldown_s=tracking.get("ScaleInCooldown"),
        step_cooldown_s=step.get("Cooldown"),
        adjustment_type=step.get("AdjustmentType"),
        step_adjustments=tuple(
            (
                s.get("MetricIntervalLowerBound"),
                s.get("MetricIntervalUpperBound"),
                int(s["ScalingAdjustment"]),
            )
            for s in step.get("StepAdjustments") or []
        ),
        min_adjustment_magnitude=step.get("MinAdjustmentMagnitude"),
        alarm_names=tuple(a["AlarmName"] for a in raw.get("Alarms") or []),
    )


def _alarm(raw: dict[str, Any]) -> Alarm:
    updated = raw.get("StateUpdatedTimestamp")
    return Alarm(
        name=raw["AlarmName"],
        state=raw.get("StateValue", "INSUFFICIENT_DATA"),
        state_updated_at=updated.astimezone(UTC) if isinstance(updated, datetime) else None,
        threshold=raw.get("Threshold"),
        metric_name=raw.get("MetricName"),
        statistic=raw.get("Statistic"),
        period_s=raw.get("Period"),
        evaluation_periods=raw.get("EvaluationPeriods"),
        datapoints_to_alarm=raw.get("DatapointsToAlarm"),
        comparison=raw.get("ComparisonOperator"),
        metrics=tuple(raw.get("Metrics") or ()),
        actions=tuple(
            raw.get("AlarmActions", [])
            + raw.get("OKActions", [])
            + raw.get("InsufficientDataActions", [])
        ),
    )


def _container(model: dict[str, Any]) -> dict[str, Any]:
    return model.get("PrimaryContainer") or next(iter(model.get("Containers") or []), {})


def _model_fields(model: dict[str, Any]) -> dict[str, Any]:
    """A `Variant`'s fields that DescribeModel answers: env, image or package, isolation."""
    container = _container(model)
    return {
        "environment": {str(k): str(v) for k, v in (container.get("Environment") or {}).items()},
        "image": container.get("Image"),
        "model_package": container.get("ModelPackageName"),
        "network_isolation": bool(model.get("EnableNetworkIsolation", False)),
    }


def describe_endpoint(session: AwsSession, endpoint: str) -> dict[str, Any]:
    """DescribeEndpoint; `EndpointNotFoundError` when there is no such endpoint."""
    return session.call(
        "sagemaker", "describe_endpoint", resource=f"endpoint {endpoint}", EndpointName=endpoint
    )


def _variants(described: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["VariantName"]: v for v in described.get("ProductionVariants", [])}


def read_snapshot(session: AwsSession, endpoint: str) -> DeployedSnapshot:
    """Read the endpoint, its model's env, and all SageMaker scaling resources of the region."""
    endpoint_info = describe_endpoint(session, endpoint)
    variants = _read_variants(session, endpoint_info)
    targets = _read_targets(session)
    policies = _read_policies(session)
    return DeployedSnapshot(
        region=session.region,
        endpoint=endpoint,
        endpoint_status=str(endpoint_info.get("EndpointStatus", "Unknown")),
        variants=variants,
        targets=targets,
        policies=policies,
        alarms=_read_alarms(session, policies),
        other_endpoints=_other_endpoints(session, endpoint, targets, policies),
        read_at=datetime.now(UTC),
        scheduled_actions=_read_scheduled_actions(session),
    )


def _read_variants(session: AwsSession, endpoint_info: dict[str, Any]) -> tuple[Variant, ...]:
    """Each live variant with what its endpoint config and model say about it."""
    config_name = endpoint_info.get("EndpointConfigName")
    config_variants: dict[str, dict[str, Any]] = {}
    if config_name:
        config = session.call(
            "sagemaker",
            "describe_endpoint_config",
            resource=f"endpoint config {config_name}",
            EndpointConfigName=config_name,
        )
        config_variants = {v["VariantName"]: v for v in config.get("ProductionVariants", [])}
    variants = []
    for name, live in _variants(endpoint_info).items():
        configured = config_variants.get(name, {})
        model_name = configured.get("ModelName")
        model: dict[str, Any] = {"environment": {}}
        if model_name:
            model = _model_fields(
                session.call(
                    "sagemaker",
                    "describe_model",
                    resource=f"model {model_name}",
                    ModelName=model_name,
                )
            )
        weight = live.get("CurrentWeight", live.get("DesiredWeight"))
        variants.append(
            Variant(
                name=name,
                desired_instance_count=live.get("DesiredInstanceCount"),
                current_instance_count=live.get("CurrentInstanceCount"),
                weight=float(
                    weight if weight is not None else configured.get("InitialVariantWeight", 1.0)
                ),
                instance_type=configured.get("InstanceType"),
                model_name=model_name,
                **model,
            )
        )
    return tuple(variants)


def _read_targets(session: AwsSession) -> tuple[ScalableTarget, ...]:
    """Every SageMaker variant scalable target of the region."""
    return tuple(
        ScalableTarget(
            resource_id=t["ResourceId"],
            min_capacity=t["MinCapacity"],
            max_capacity=t["MaxCapacity"],
            suspended=SuspendedState.from_api(t.get("SuspendedState")),
        )
        for t in session.paginate(
            "application-autoscaling",
            "describe_scalable_targets",
            "ScalableTargets",
            resource=f"SageMaker scaling in {session.region}",
            ServiceNamespace=SERVICE_NAMESPACE,
        )
        if t.get("ScalableDimension") == SCALABLE_DIMENSION
    )


def _read_policies(session: AwsSession) -> tuple[ScalingPolicy, ...]:
    """Every SageMaker variant scaling policy of the region."""
    return tuple(
        _policy(p)
        for p in session.paginate(
            "application-autoscaling",
            "describe_scaling_policies",
            "ScalingPolicies",
            resource=f"SageMaker scaling in {session.region}",
            ServiceNamespace=SERVICE_NAMESPACE,
        )
        if p.get("ScalableDimension") == SCALABLE_DIMENSION
    )


def _read_scheduled_actions(session: AwsSession) -> tuple[DeployedScheduledAction, ...]:
    """Every scheduled action on a SageMaker variant of the region."""
    return tuple(
        DeployedScheduledAction(
            name=a["ScheduledActionName"],
            resource_id=a["ResourceId"],
            schedule=a["Schedule"],
            timezone=a.get("Timezone"),
            min_capacity=(a.get("ScalableTargetAction") or {}).get("MinCapacity"),
            max_capacity=(a.get("ScalableTargetAction") or {}).get("MaxCapacity"),
            start_time=a.get("StartTime"),
            end_time=a.get("EndTime"),
        )
        for a in session.paginate(
            "application-autoscaling",
            "describe_scheduled_actions",
            "ScheduledActions",
            resource=f"SageMaker scheduled actions in {session.region}",
            ServiceNamespace=SERVICE_NAMESPACE,
        )
        if a.get("ScalableDimension", SCALABLE_DIMENSION) == SCALABLE_DIMENSION
    )


def _read_alarms(session: AwsSession, policies: tuple[ScalingPolicy, ...]) -> tuple[Alarm, ...]:
    """The alarms the policies name, or whose actions are a policy's."""
    arns = {p.arn for p in policies}
    listed = {name for p in policies for name in p.alarm_names}
    return tuple(
        alarm
        for alarm in map(
            _alarm,
            session.paginate(
                "cloudwatch",
                "describe_alarms",
                "MetricAlarms",
                resource=f"CloudWatch alarms in {session.region}",
            ),
        )
        if alarm.name in listed or arns.intersection(alarm.actions)
    )


def _other_endpoints(
    session: AwsSession,
    endpoint: str,
    targets: tuple[ScalableTarget, ...],
    policies: tuple[ScalingPolicy, ...],
) -> dict[str, tuple[str, ...] | None]:
    """The variants of every other endpoint a target or policy names (None: no such endpoint)."""
    others: dict[str, tuple[str, ...] | None] = {}
    for rid in {t.resource_id for t in targets} | {p.resource_id for p in policies}:
        parsed = parse_resource_id(rid)
        if parsed is None or parsed[0] == endpoint or parsed[0] in others:
            continue
        try:
            others[parsed[0]] = tuple(_variants(describe_endpoint(session, parsed[0])))
        except EndpointNotFoundError:
            others[parsed[0]] = None
    return others
