"""EndpointObservability: the dashboard and alarms an operator reads beside the plan.

Metric names are the constants the container emits (`tts_bench.telemetry`); thresholds are the
plan's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.deployment import (
    dashboard_name,
    first_chunk_alarm_name,
    queue_saturation_alarm_name,
    server_errors_alarm_name,
)
from tts_bench.telemetry import (
    CONCURRENT_REQUESTS_PER_MODEL,
    DIMENSIONS,
    FIRST_CHUNK_LATENCY,
    FIRST_CHUNK_P95_STATISTIC,
    IN_FLIGHT,
    NAMESPACE,
    QUEUE_SATURATED,
    SAGEMAKER_4XX,
    SAGEMAKER_5XX,
    SAGEMAKER_CPU,
    SAGEMAKER_INSTANCE_NAMESPACE,
    SAGEMAKER_INVOCATIONS,
    SAGEMAKER_NAMESPACE,
)

ALARM_PERIOD_S = 60
LATENCY_EVALUATION_PERIODS = 3


@dataclass(frozen=True)
class EndpointObservabilityArgs:
    endpoint_name: str
    variant_name: str
    region: str
    plan: PlanArtifact
    tags: dict[str, str]


def dashboard_body(endpoint: str, variant: str, region: str, plan: PlanArtifact) -> str:
    """The dashboard JSON: concurrency against the plan's target, first-chunk p95 against its
    alarm, invocations, errors and 503s, instance count."""
    dims = [DIMENSIONS[0], endpoint, DIMENSIONS[1], variant]

    def widget(
        title: str, metrics: list[list[Any]], y: int, x: int, **extra: Any
    ) -> dict[str, Any]:
        props = {"title": title, "region": region, "metrics": metrics, "view": "timeSeries"}
        props.update(extra)
        return {"type": "metric", "x": x, "y": y, "width": 12, "height": 6, "properties": props}

    def line(label: str, value: float) -> dict[str, Any]:
        return {"label": label, "value": value}

    widgets = [
        widget(
            "Concurrency per instance vs plan target",
            [
                [
                    SAGEMAKER_NAMESPACE,
                    CONCURRENT_REQUESTS_PER_MODEL,
                    *dims,
                    # Graphed in the units the target is in, so the lines mean what they say.
                    {"stat": plan.target_units.statistic, "period": plan.target_units.period_s},
                ],
                [NAMESPACE, IN_FLIGHT, *dims, {"stat": "Maximum", "period": 10}],
            ],
            0,
            0,
            annotations={
                "horizontal": [
                    line(f"scale out ({plan.plan_id})", plan.scaling_target_value),
                    line(
                        f"scale in ({plan.scale_in_units.statistic} {plan.scale_in_units.period_s} s)",
                        plan.scale_in_threshold,
                    ),
                    line("queue bound", plan.queue_max_depth),
                ]
            },
        ),
        widget(
            "FirstChunkLatency p95 (ms)",
            [
                [
                    NAMESPACE,
                    FIRST_CHUNK_LATENCY,
                    *dims,
                    {"stat": FIRST_CHUNK_P95_STATISTIC, "period": 60},
                ]
            ],
            0,
            12,
            annotations={"horizontal": [line("alarm", plan.first_chunk_alarm_ms)]},
        ),
        widget(
            "Invocations",
            [[SAGEMAKER_NAMESPACE, SAGEMAKER_INVOCATIONS, *dims, {"stat": "Sum", "period": 60}]],
            6,
            0,
        ),
        widget(
            "Errors and queue saturation (503)",
            [
                [SAGEMAKER_NAMESPACE, SAGEMAKER_5XX, *dims, {"stat": "Sum", "period": 60}],
                [SAGEMAKER_NAMESPACE, SAGEMAKER_4XX, *dims, {"stat": "Sum", "period": 60}],
                [NAMESPACE, QUEUE_SATURATED, *dims, {"stat": "Sum", "period": 60}],
            ],
            6,
            12,
        ),
        widget(
            "Instances (CPUUtilization samples per minute)",
            [
                [
                    SAGEMAKER_INSTANCE_NAMESPACE,
                    SAGEMAKER_CPU,
                    *dims,
                    {"stat": "SampleCount", "period": 60},
                ]
            ],
            12,
            0,
            annotations={"horizontal": [line("plan max", plan.max_instances)]},
        ),
    ]
    return json.dumps({"widgets": widgets}, sort_keys=True)


class EndpointObservability(pulumi.ComponentResource):
    """The dashboard and three alarms: first-chunk p95 at the plan's threshold, queue
    saturation (503s from the admission gate), and 5xx from the variant."""

    def __init__(
        self, name: str, args: EndpointObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("speech:aws:EndpointObservability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        endpoint, variant, plan = args.endpoint_name, args.variant_name, args.plan
        dimensions = dict(zip(DIMENSIONS, (endpoint, variant), strict=True))

        self.dashboard = aws.cloudwatch.Dashboard(
            f"{name}-dashboard",
            dashboard_name=dashboard_name(endpoint),
            dashboard_body=dashboard_body(endpoint, variant, args.region, plan),
            opts=child,
        )
        self.first_chunk_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-first-chunk-p95",
            name=first_chunk_alarm_name(endpoint, variant),
            alarm_description=(
                f"{FIRST_CHUNK_LATENCY} p95 above {plan.first_chunk_alarm_ms} ms "
                f"({plan.alarm_rule}, plan {plan.plan_id})"
            ),
            namespace=NAMESPACE,
            metric_name=FIRST_CHUNK_LATENCY,
            dimensions=dimensions,
            extended_statistic=FIRST_CHUNK_P95_STATISTIC,
            period=ALARM_PERIOD_S,
            evaluation_periods=LATENCY_EVALUATION_PERIODS,
            threshold=plan.first_chunk_alarm_ms,
            comparison_operator="GreaterThanThreshold",
            treat_missing_data="notBreaching",
            tags=args.tags,
            opts=child,
        )
        self.queue_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-queue-saturated",
            name=queue_saturation_alarm_name(endpoint, variant),
            alarm_description=(
                f"The admission gate refused requests (queue bound {plan.queue_max_depth}, "
                f"plan {plan.plan_id})"
            ),
            namespace=NAMESPACE,
            metric_name=QUEUE_SATURATED,
            dimensions=dimensions,
            statistic="Sum",
            period=ALARM_PERIOD_S,
            evaluation_periods=1,
            threshold=0,
            comparison_operator="GreaterThanThreshold",
            treat_missing_data="notBreaching",
            tags=args.tags,
            opts=child,
        )
        self.errors_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-5xx",
            name=server_errors_alarm_name(endpoint, variant),
            alarm_description="The variant answered 5xx",
            namespace=SAGEMAKER_NAMESPACE,
            metric_name=SAGEMAKER_5XX,
            dimensions=dimensions,
            statistic="Sum",
            period=ALARM_PERIOD_S,
            evaluation_periods=1,
            threshold=0,
            comparison_operator="GreaterThanThreshold",
            treat_missing_data="notBreaching",
            tags=args.tags,
            opts=child,
        )
        self.dashboard_name: pulumi.Output[str] = self.dashboard.dashboard_name
        self.register_outputs(
            {
                "dashboard_name": self.dashboard_name,
                "alarm_names": [
                    self.first_chunk_alarm.name,
                    self.queue_alarm.name,
                    self.errors_alarm.name,
                ],
            }
        )
