"""A CloudWatch alarm as a plan deploys it: on one SageMaker metric of the variant, or on the
fleet-aware metric-math expression (`AfterOneLess`). Part of the plan artifact's schema
(`artifacts.plan` re-exports both)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, NonNegativeFloat, PositiveInt, model_serializer, model_validator

from tts_bench.artifacts.cloudwatch import MetricName, Statistic
from tts_bench.strict import StrictModel as _Strict

Comparison = Literal[
    "GreaterThanThreshold",
    "GreaterThanOrEqualToThreshold",
    "LessThanThreshold",
    "LessThanOrEqualToThreshold",
]


class AfterOneLess(_Strict):
    """A scale-in alarm that reads the fleet's size: a CloudWatch metric-math expression over the
    variant's Invocations and InvocationsPerInstance (both Sum over the alarm's period), whose
    value is the invocations per instance the period would have had with one instance fewer,
    on a fleet of at least `min_fleet` instances; on a smaller one it never breaches
    (`planning.aws.metric_math` builds the expression and computes its value)."""

    min_fleet: Annotated[int, Field(ge=2)]


class AlarmSpec(_Strict):
    """A CloudWatch alarm on one SageMaker metric of the variant (EndpointName, VariantName), or,
    with `after_one_less`, on the metric-math expression that reads it with Invocations."""

    metric: MetricName
    statistic: Statistic
    period_s: PositiveInt
    evaluation_periods: PositiveInt
    datapoints_to_alarm: PositiveInt
    comparison: Comparison
    threshold: NonNegativeFloat
    treat_missing_data: Literal["missing", "breaching", "notBreaching", "ignore"]
    after_one_less: AfterOneLess | None = None

    @model_validator(mode="after")
    def _m_of_n(self) -> AlarmSpec:
        if self.datapoints_to_alarm > self.evaluation_periods:
            raise ValueError("datapoints_to_alarm exceeds evaluation_periods")
        if self.after_one_less is not None and (
            self.metric != "InvocationsPerInstance"
            or self.statistic != "Sum"
            or self.comparison != "LessThanThreshold"
        ):
            raise ValueError(
                "an after_one_less alarm reads InvocationsPerInstance Sum, LessThanThreshold"
            )
        return self

    @model_serializer(mode="wrap")
    def _without_absent_math(self, handler: Any) -> dict[str, Any]:
        # A plan written before the field existed rebuilds byte for byte.
        data = handler(self)
        if data.get("after_one_less", 0) is None:
            del data["after_one_less"]
        return data
