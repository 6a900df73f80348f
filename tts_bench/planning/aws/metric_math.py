"""The fleet-aware scale-in alarm: one CloudWatch metric-math expression, built, read and computed.

A step policy cannot know how many instances it removes a percentage of, and one instance is a
fifth of a fleet of five: a scale-in that lands a large fleet at its target lands a small one
far above it, and a small fleet's load grows fastest on a ramp. CloudWatch can tell the fleet's
size from the variant's own metrics: each request adds 1 to Invocations and 1/N to
InvocationsPerInstance [SM-metric], so over a period n = Invocations / InvocationsPerInstance
is the instances serving. The alarm reads

    value = Invocations / (n − 1)    the period's invocations per instance had one instance
                                     fewer served them, when n ≥ min_fleet
            the threshold            below min_fleet (never breaching: a small fleet is left to
                                     target tracking's own, slower scale-in)

and no datapoint in a period with no invocations. Its ids are m1 (Invocations), m2
(InvocationsPerInstance), n and e (the value, the only one returned) [CW-math]; metric math's
IF picks per datapoint [CW-math-if]. CloudWatch lets an alarm on an expression invoke an Auto
Scaling action (only EC2 actions are refused [CW-math-alarm]).

`value` is what the simulator and the local cloud compute from their own windows; `queries`
is what the Pulumi program and the local cloud's deploy send; `parse` reads a deployed alarm
back, recognising only what `queries` writes, so the two cannot drift apart.

Sources:
- [SM-metric] https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html
- [CW-math] https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html
- [CW-math-if] the same page, "Using IF expressions"
- [CW-math-alarm] https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Create-alarm-on-metric-math-expression.html
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tts_bench.artifacts.alarm import AfterOneLess
from tts_bench.telemetry import (
    SAGEMAKER_INVOCATIONS,
    SAGEMAKER_INVOCATIONS_PER_INSTANCE,
    SAGEMAKER_NAMESPACE,
)

RETURNED_ID: Final = "e"


@dataclass(frozen=True)
class FleetMath:
    """The expression's parameter (the plan's `AfterOneLess`)."""

    min_fleet: int


def of(spec: AfterOneLess) -> FleetMath:
    """The plan's `AfterOneLess` as the expression's parameters."""
    return FleetMath(spec.min_fleet)


def value(
    invocations: float, per_instance: float, math: FleetMath, threshold: float
) -> float | None:
    """The expression's datapoint for one period's two sums (None: no datapoint)."""
    if invocations <= 0 or per_instance <= 0:
        return None
    n = invocations / per_instance
    if n < math.min_fleet:
        return threshold
    return invocations / (n - 1)


def datapoints(
    counts: Sequence[float | None],
    per_instance: Sequence[float | None],
    math: FleetMath,
    threshold: float,
) -> list[float | None]:
    """The expression over an alarm's periods: Invocations and InvocationsPerInstance sums."""
    return [
        None if count is None or per is None else value(count, per, math, threshold)
        for count, per in zip(counts, per_instance, strict=True)
    ]


def expression(math: FleetMath, threshold: float) -> str:
    return f"IF(n >= {math.min_fleet}, m1 / (n - 1), {threshold!r})"


def queries(
    math: FleetMath, threshold: float, endpoint: str, variant: str, period_s: int
) -> list[dict[str, Any]]:
    """The alarm's `Metrics` (PutMetricAlarm's MetricDataQuery list, boto3's spelling)."""
    dimensions = [
        {"Name": "EndpointName", "Value": endpoint},
        {"Name": "VariantName", "Value": variant},
    ]

    def stat(query_id: str, metric: str) -> dict[str, Any]:
        return {
            "Id": query_id,
            "MetricStat": {
                "Metric": {
                    "Namespace": SAGEMAKER_NAMESPACE,
                    "MetricName": metric,
                    "Dimensions": dimensions,
                },
                "Period": period_s,
                "Stat": "Sum",
            },
            "ReturnData": False,
        }

    return [
        stat("m1", SAGEMAKER_INVOCATIONS),
        stat("m2", SAGEMAKER_INVOCATIONS_PER_INSTANCE),
        {"Id": "n", "Expression": "m1 / m2", "Label": "instances serving", "ReturnData": False},
        {
            "Id": RETURNED_ID,
            "Expression": expression(math, threshold),
            "Label": "invocations per instance with one instance fewer",
            "ReturnData": True,
        },
    ]


_EXPRESSION = re.compile(r"IF\(n >= (?P<min>\d+), m1 / \(n - 1\), (?P<threshold>[0-9.eE+-]+)\)")


def returned_expression(metrics: Sequence[Mapping[str, Any]]) -> str | None:
    """The expression of the one query an alarm evaluates (ReturnData unset counts as true);
    None unless exactly one is returned."""
    returned = [q for q in metrics if q.get("ReturnData", True)]
    return str(returned[0].get("Expression", "")) if len(returned) == 1 else None


def dimensions_of(metrics: Sequence[Mapping[str, Any]]) -> str:
    """The endpoint and variant the queries read, as `endpoint/variant`."""
    stat = next((q["MetricStat"] for q in metrics if "MetricStat" in q), {})
    return "/".join(str(d.get("Value")) for d in stat.get("Metric", {}).get("Dimensions", []))


def parse(metrics: Sequence[Mapping[str, Any]]) -> tuple[FleetMath, int] | None:
    """A deployed alarm's `Metrics` read back: the parameters and the period, when they are
    exactly what `queries` writes for them (same ids, metrics, statistic and expression);
    None for anything else."""
    returned = [q for q in metrics if q.get("ReturnData", True)]
    if len(returned) != 1 or returned[0].get("Id") != RETURNED_ID:
        return None
    match = _EXPRESSION.fullmatch(returned_expression(metrics) or "")
    stats = [q for q in metrics if "MetricStat" in q]
    if match is None or not stats:
        return None
    math = FleetMath(int(match["min"]))
    if math.min_fleet < 2:
        return None
    period = int(stats[0]["MetricStat"].get("Period", 0))
    dimensions = stats[0]["MetricStat"]["Metric"].get("Dimensions", [])
    names = {d["Name"]: d["Value"] for d in dimensions}
    endpoint, variant = names.get("EndpointName", ""), names.get("VariantName", "")
    wanted = queries(math, float(match["threshold"]), endpoint, variant, period)
    if _canonical(metrics) != _canonical(wanted):
        return None
    return math, period


def same(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> bool:
    """Whether two `Metrics` lists are the same queries (what `_canonical` keeps)."""
    return _canonical(a) == _canonical(b)


def _canonical(metrics: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """What identifies a query: labels, account ids and key order left out."""
    rows = []
    for q in metrics:
        stat = q.get("MetricStat")
        metric = stat["Metric"] if stat else {}
        rows.append((
            q.get("Id"), q.get("Expression"), bool(q.get("ReturnData", True)),
            metric.get("Namespace"), metric.get("MetricName"),
            tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))),
            stat.get("Period") if stat else None, stat.get("Stat") if stat else None,
        ))  # fmt: skip
    return sorted(rows, key=repr)
