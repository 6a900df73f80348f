"""Reading a rehearsal's scaling activities back: a refused capacity change changed nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tts_bench.aws.scaling_record import Watched, read_activities


class Activities:
    """The one call `read_activities` makes, answered from a list (the API's page)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def paginate(self, service: str, operation: str, key: str, **_: Any) -> list[dict[str, Any]]:
        assert (service, operation, key) == (
            "application-autoscaling", "describe_scaling_activities", "ScalingActivities",
        )  # fmt: skip
        return self.items


def _activity(at_s: float, status: str, to: int) -> dict[str, Any]:
    return {
        "StartTime": datetime.fromtimestamp(at_s, tz=UTC),
        "StatusCode": status,
        "Description": f"Setting desired instance count to {to}.",
        "Cause": "monitor alarm a in state ALARM triggered policy p",
        "StatusMessage": f"desired instance count 1 -> {to}"
        if status != "Failed"
        else f"Failed to set desired instance count to {to}. Reason: ValidationException: "
        'Cannot update in-progress endpoint "arn".',
    }


def test_a_failed_activity_is_not_read_as_a_scaling_action() -> None:
    session = Activities(
        [_activity(100.0, "Successful", 4), _activity(160.0, "Failed", 7),
         _activity(400.0, "InProgress", 9)]
    )  # fmt: skip
    watched = Watched("e", "AllTraffic", ())
    found = read_activities(session, watched, 0.0, 1000.0)  # type: ignore[arg-type]
    assert [(a.t_s, a.after, a.status) for a in found] == [
        (100.0, 4, "Successful"),
        (400.0, 9, "InProgress"),
    ]


class MetricData:
    """The one call `read_datapoints` makes, answered as CloudWatch does for each query id:
    `m<i>` the alarm's metric, `i<i>` the variant's Invocations."""

    def __init__(self, series: dict[str, list[tuple[float, float]]]) -> None:
        self.series = series
        self.asked: list[dict[str, Any]] = []

    def paginate(self, service: str, operation: str, key: str, **kw: Any) -> list[dict[str, Any]]:
        assert (service, operation, key) == ("cloudwatch", "get_metric_data", "MetricDataResults")
        self.asked = kw["MetricDataQueries"]
        return [
            {
                "Id": q["Id"],
                "Timestamps": [datetime.fromtimestamp(t, tz=UTC) for t, _ in self.series[q["Id"]]],
                "Values": [v for _, v in self.series[q["Id"]]],
            }
            for q in self.asked
        ]


def test_a_metric_math_alarm_is_read_back_as_its_expressions_values() -> None:
    """The fleet-aware scale-in alarm evaluates Invocations ÷ (n − 1), not its metric: the
    rehearsal's series and detection lags must read that. Minute 0: 25 instances at 700 each
    (one fewer: 729.17); minute 1: 10 instances (under the min fleet: the threshold itself);
    minute 2: no invocations, no datapoint."""
    from tts_bench.aws.live_scaling import DeployedAlarm
    from tts_bench.aws.scaling_record import read_datapoints
    from tts_bench.planning.aws import metric_math
    from tts_bench.planning.aws import scaling as aws_scaling

    rule = aws_scaling.AlarmRule(
        "scale-in", "InvocationsPerInstance", "Sum", 60, 3, 3, 826.5, "LessThanThreshold",
        "missing", after_one_less=metric_math.FleetMath(20),
    )  # fmt: skip
    data = MetricData(
        {
            "m0": [(0.0, 700.0), (60.0, 700.0), (120.0, 0.0)],
            "i0": [(0.0, 25 * 700.0), (60.0, 10 * 700.0), (120.0, 0.0)],
        }
    )
    watched = Watched("speech", "AllTraffic", (DeployedAlarm("scale-in", "step", rule),))
    points = read_datapoints(data, watched, 0.0, 180.0)  # type: ignore[arg-type]
    assert [q["MetricStat"]["Metric"]["MetricName"] for q in data.asked] == [
        "InvocationsPerInstance", "Invocations",
    ]  # fmt: skip
    assert [(p.start_s, round(p.value, 2)) for p in points["scale-in"]] == [
        (0.0, round(25 * 700 / 24, 2)),
        (60.0, 826.5),
    ]
