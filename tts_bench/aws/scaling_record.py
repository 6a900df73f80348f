"""What a variant's scaling did while load ran, each from its own source.

While the load runs, `EndpointPoller` reads DescribeEndpoint every `POLL_SERVICE_S` of the
service's clock (the desired and InService counts; AWS keeps no history of them). Afterwards
`read_back` asks CloudWatch for the deployed alarms' metrics over the run (each at its alarm's
statistic and period), DescribeAlarmHistory for their state changes and
DescribeScalingActivities for what Application Auto Scaling did. Times are seconds of the
service's clock from the run's start (a compressed local cloud stamps everything in its
virtual time; `aws.clock`). Used by `tts-bench rehearse` and `ttotal --trigger organic`.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tts_bench.aws.clock import ServiceClock
from tts_bench.aws.live_scaling import DeployedAlarm
from tts_bench.aws.session import AwsSession
from tts_bench.deployment import SCALABLE_DIMENSION, SERVICE_NAMESPACE, resource_id
from tts_bench.planning.aws import metric_math
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.telemetry import SAGEMAKER_INVOCATIONS, SAGEMAKER_NAMESPACE

POLL_SERVICE_S = 2.0  # of the service's clock between two reads of the endpoint
MIN_POLL_WALL_S = 0.05
MAX_DATAPOINTS = 100_000  # GetMetricData's page; a two-hour run at 10 s is 720


@dataclass(frozen=True)
class Poll:
    t_s: float
    desired: int
    in_service: int
    status: str


@dataclass(frozen=True)
class Transition:
    """An alarm's state change, as DescribeAlarmHistory reports it."""

    t_s: float
    alarm: str
    old: str
    new: str


@dataclass(frozen=True)
class Activity:
    """A scaling activity, as DescribeScalingActivities reports it."""

    t_s: float
    before: int
    after: int
    cause: str
    status: str
    alarm: str | None  # the alarm its cause names, when one triggered it


@dataclass(frozen=True)
class ReadBack:
    datapoints: dict[str, list[aws_scaling.Datapoint]]  # alarm name → its metric at its period
    transitions: list[Transition]
    activities: list[Activity]


class EndpointPoller:
    """A thread reading the variant's desired and InService counts until stopped."""

    def __init__(
        self, session: AwsSession, endpoint: str, variant: str, clock: ServiceClock, start_s: float
    ) -> None:
        self._session, self._endpoint, self._variant = session, endpoint, variant
        self._clock, self._start_s = clock, start_s
        self._stop = threading.Event()
        self.polls: list[Poll] = []
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="endpoint-poller", daemon=True)

    def start(self) -> EndpointPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        every = min(max(self._clock.wall_seconds(POLL_SERVICE_S), MIN_POLL_WALL_S), POLL_SERVICE_S)
        client = self._session.client("sagemaker")
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                described = client.describe_endpoint(EndpointName=self._endpoint)
            except Exception:  # a lost poll leaves a gap; the run goes on
                self.failures += 1
            else:
                self._record(described)
            self._stop.wait(max(0.0, every - (time.monotonic() - began)))

    def _record(self, described: dict[str, Any]) -> None:
        for variant in described.get("ProductionVariants", []):
            if variant.get("VariantName") == self._variant:
                self.polls.append(
                    Poll(
                        self._clock.now() - self._start_s,
                        int(variant.get("DesiredInstanceCount") or 0),
                        int(variant.get("CurrentInstanceCount") or 0),
                        str(described.get("EndpointStatus", "")),
                    )
                )


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _metric_query(
    index: int, rule: aws_scaling.AlarmRule, endpoint: str, variant: str, metric: str = ""
) -> dict[str, Any]:
    """`metric` (default the rule's own): Invocations beside a metric-math alarm's metric,
    under the id `i<index>`, summed over its period."""
    return {
        "Id": f"{'i' if metric else 'm'}{index}",
        "MetricStat": {
            "Metric": {
                "Namespace": SAGEMAKER_NAMESPACE,
                "MetricName": metric or rule.metric,
                "Dimensions": [
                    {"Name": "EndpointName", "Value": endpoint},
                    {"Name": "VariantName", "Value": variant},
                ],
            },
            "Period": rule.period_s,
            "Stat": "Sum" if metric else rule.statistic,
        },
        "ReturnData": True,
    }


@dataclass(frozen=True)
class Watched:
    """What is read back: the variant and its deployed alarms."""

    endpoint: str
    variant: str
    alarms: tuple[DeployedAlarm, ...]

    def alarm_named_in(self, cause: str) -> str | None:
        return next((a.rule.name for a in self.alarms if f"alarm {a.rule.name} " in cause), None)


def read_datapoints(
    session: AwsSession,
    watched: Watched,
    start_s: float,
    end_s: float,
    origin_s: float | None = None,
) -> dict[str, list[aws_scaling.Datapoint]]:
    """Each deployed alarm's metric over [start_s, end_s] of the service's clock, at the alarm's
    statistic and period: the datapoints it evaluated, as CloudWatch gives them back, each at
    its period's start less `origin_s` (default `start_s`). A metric-math alarm's are its
    expression's, computed from its metric and the variant's Invocations (`metric_math`)."""
    origin = start_s if origin_s is None else origin_s
    endpoint, variant = watched.endpoint, watched.variant
    rules = [a.rule for a in watched.alarms]
    queries = [_metric_query(i, r, endpoint, variant) for i, r in enumerate(rules)]
    queries += [
        _metric_query(i, r, endpoint, variant, SAGEMAKER_INVOCATIONS)
        for i, r in enumerate(rules)
        if r.after_one_less is not None
    ]
    # CloudWatch (and moto) put each period's datapoint on the grid StartTime begins: start on
    # the longest period's boundary, so every period lies as its alarm evaluates it.
    grid = max((r.period_s for r in rules), default=60)
    start_s, end_s = math.floor(start_s / grid) * grid, math.ceil(end_s / grid) * grid
    results = session.paginate(
        "cloudwatch",
        "get_metric_data",
        "MetricDataResults",
        resource=f"metrics of endpoint {endpoint}",
        MetricDataQueries=queries,
        StartTime=_stamp(start_s),
        EndTime=_stamp(end_s),
        ScanBy="TimestampAscending",
        MaxDatapoints=MAX_DATAPOINTS,
    )
    found: dict[str, list[aws_scaling.Datapoint]] = {r.name: [] for r in rules}
    counts: dict[str, dict[float, float]] = {r.name: {} for r in rules}
    for result in results:
        rule = rules[int(str(result["Id"])[1:])]
        points = [
            aws_scaling.Datapoint(stamp.timestamp() - origin, float(value))
            for stamp, value in zip(result["Timestamps"], result["Values"], strict=True)
        ]
        if str(result["Id"]).startswith("i"):
            counts[rule.name] |= {p.start_s: p.value for p in points}
        else:
            found[rule.name] += points
    for rule in rules:
        points = sorted(found[rule.name], key=lambda p: p.start_s)
        if rule.after_one_less is not None:
            values = metric_math.datapoints(
                [counts[rule.name].get(p.start_s) for p in points],
                [p.value for p in points], rule.after_one_less, rule.threshold,
            )  # fmt: skip
            points = [
                aws_scaling.Datapoint(p.start_s, v)
                for p, v in zip(points, values, strict=True)
                if v is not None
            ]
        found[rule.name] = points
    return found


def read_transitions(
    session: AwsSession,
    watched: Watched,
    start_s: float,
    end_s: float,
    origin_s: float | None = None,
) -> list[Transition]:
    """The alarms' state changes in [start_s, end_s], at their times less `origin_s`."""
    origin = start_s if origin_s is None else origin_s
    transitions: list[Transition] = []
    for alarm in watched.alarms:
        items = session.paginate(
            "cloudwatch",
            "describe_alarm_history",
            "AlarmHistoryItems",
            resource=f"alarm {alarm.rule.name}",
            AlarmName=alarm.rule.name,
            HistoryItemType="StateUpdate",
            StartDate=_stamp(start_s),
            EndDate=_stamp(end_s),
            ScanBy="TimestampAscending",
        )
        for item in items:
            old, _, new = (
                str(item.get("HistorySummary", ""))
                .removeprefix("Alarm updated from ")
                .partition(" to ")
            )
            transitions.append(
                Transition(item["Timestamp"].timestamp() - origin, alarm.rule.name, old, new)
            )
    return sorted(transitions, key=lambda t: t.t_s)


def read_activities(
    session: AwsSession,
    watched: Watched,
    start_s: float,
    end_s: float,
    origin_s: float | None = None,
) -> list[Activity]:
    """The variant's scaling activities started in [start_s, end_s], oldest first, at their
    times less `origin_s`; a Failed one (a capacity change the endpoint refused while Updating)
    changed nothing and is left out."""
    origin = start_s if origin_s is None else origin_s
    rid = resource_id(watched.endpoint, watched.variant)
    items = session.paginate(
        "application-autoscaling",
        "describe_scaling_activities",
        "ScalingActivities",
        resource=f"scaling activities of {rid}",
        ServiceNamespace=SERVICE_NAMESPACE,
        ResourceId=rid,
        ScalableDimension=SCALABLE_DIMENSION,
    )
    activities = []
    for item in items:
        started = item["StartTime"].timestamp()
        if not start_s <= started <= end_s or item.get("StatusCode") == "Failed":
            continue
        before, after = _counts(item)
        cause = str(item.get("Cause", ""))
        activities.append(
            Activity(
                started - origin,
                before,
                after,
                cause,
                str(item.get("StatusCode", "")),
                watched.alarm_named_in(cause),
            )
        )
    return sorted(activities, key=lambda a: a.t_s)


def _counts(item: dict[str, Any]) -> tuple[int, int]:
    """(before, after) from "Setting desired instance count to N." and the status message."""
    after_text = str(item.get("Description", "")).rstrip(".").rsplit(" ", 1)[-1]
    after = int(after_text) if after_text.isdigit() else -1
    message = str(item.get("StatusMessage", ""))
    before_text = message.split("->")[0].strip().rsplit(" ", 1)[-1] if "->" in message else ""
    before = int(before_text) if before_text.isdigit() else -1
    return before, after


def read_back(session: AwsSession, watched: Watched, start_s: float, end_s: float) -> ReadBack:
    return ReadBack(
        read_datapoints(session, watched, start_s, end_s),
        read_transitions(session, watched, start_s, end_s),
        read_activities(session, watched, start_s, end_s),
    )
