"""CloudWatch alarms over SageMaker's metrics: datapoints, states and one evaluation.

Part of the one statement of AWS's rules (`planning.aws.scaling` holds the policies and the
engine; docs/aws-semantics.md tables every rule with its source).

Alarms [CW-eval]: an alarm is in ALARM when at least DatapointsToAlarm of its last
EvaluationPeriods datapoints breach; missing datapoints count as TreatMissingData says. An alarm
is evaluated once per period (assumption for the cadence), over the datapoints published by
then: a high-resolution datapoint at once, a standard one a period after it closes (assumption:
AWS documents no figure; the variant set's delay). A metric-math alarm (`after_one_less`, the
fleet-aware scale-in) reads Invocations beside its metric and evaluates the expression's value
per period (`planning.aws.metric_math`).

- [CW-eval] https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-evaluation.html
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from tts_bench.planning.aws import metric_math
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics

STANDARD_PERIOD_S: Final = 60


def publication_delay_s(period_s: int, semantics: AwsSemantics = DOCUMENTED) -> int:
    """A datapoint of a standard-resolution period (≥ 60 s) reaches alarms late (the set's
    delay); a high-resolution one at once (assumption)."""
    return semantics.standard_publication_delay_s if period_s >= STANDARD_PERIOD_S else 0


class AlarmState(StrEnum):
    OK = "OK"
    ALARM = "ALARM"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


@dataclass(frozen=True)
class Datapoint:
    """One 10 s window of a metric, as published: its start and its value."""

    start_s: float
    value: float


@dataclass(frozen=True)
class AlarmRule:
    name: str
    metric: str
    statistic: str
    period_s: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str
    publication_delay: int | None = None  # None: the documented reading for its period
    # A metric-math alarm over Invocations and this metric (`metric_math`); None: the metric.
    after_one_less: metric_math.FleetMath | None = None

    @property
    def delay_s(self) -> int:
        if self.publication_delay is not None:
            return self.publication_delay
        return publication_delay_s(self.period_s)

    @property
    def detection_s(self) -> int:
        """From a crossing at a period's start to the evaluation that sees the alarm's last
        breaching datapoint: its datapoints × the period, plus the publication delay."""
        return self.period_s * self.datapoints_to_alarm + self.delay_s

    @property
    def lookback_s(self) -> int:
        """How far back its evaluation reads, publication delay included."""
        return self.period_s * (self.evaluation_periods + 1) + self.delay_s


def reduce(values: Sequence[float], statistic: str) -> float:
    if statistic == "Maximum":
        return max(values)
    if statistic == "Minimum":
        return min(values)
    if statistic == "Sum":
        return sum(values)
    if statistic == "SampleCount":
        return float(len(values))
    return sum(values) / len(values)  # Average


def period_datapoints(
    windows: Sequence[Datapoint], period_s: int, statistic: str, count: int, end_s: float
) -> list[float | None]:
    """The last `count` complete periods (aligned to multiples of `period_s`) ending at or
    before `end_s`, oldest first, each its windows reduced by `statistic` (None: no window)."""
    last_end = math.floor(end_s / period_s + 1e-9) * period_s
    first = last_end - count * period_s
    buckets: list[list[float]] = [[] for _ in range(count)]
    for window in reversed(windows):
        if window.start_s < first:
            break
        index = int((window.start_s - first) // period_s)
        if 0 <= index < count:
            buckets[index].append(window.value)
    return [reduce(b, statistic) if b else None for b in buckets]


def breaches(value: float, comparison: str, threshold: float) -> bool:
    return {
        "GreaterThanThreshold": value > threshold,
        "GreaterThanOrEqualToThreshold": value >= threshold,
        "LessThanThreshold": value < threshold,
        "LessThanOrEqualToThreshold": value <= threshold,
    }[comparison]


def alarm_state(rule: AlarmRule, points: Sequence[float | None]) -> AlarmState:
    verdicts: list[bool] = []
    for value in points:
        if value is None:
            if rule.treat_missing == "breaching":
                verdicts.append(True)
            elif rule.treat_missing == "notBreaching":
                verdicts.append(False)
            continue
        verdicts.append(breaches(value, rule.comparison, rule.threshold))
    if not verdicts:
        return AlarmState.INSUFFICIENT_DATA
    return AlarmState.ALARM if sum(verdicts) >= rule.datapoints_to_alarm else AlarmState.OK


@dataclass(frozen=True)
class AlarmReading:
    """An alarm's state at an evaluation and the newest datapoint it saw (None: none)."""

    state: AlarmState
    value: float | None
    points: tuple[float | None, ...] = ()


def read_alarm(
    rule: AlarmRule,
    windows: Sequence[Datapoint],
    now_s: float,
    invocations: Sequence[Datapoint] = (),
) -> AlarmReading:
    """Evaluate `rule` at `now_s` over a metric's published windows (publication delay applied);
    a metric-math alarm also over the variant's Invocations windows."""
    end_s = now_s - rule.delay_s
    points = period_datapoints(
        windows, rule.period_s, rule.statistic, rule.evaluation_periods, end_s
    )
    if rule.after_one_less is not None:
        counts = period_datapoints(
            invocations, rule.period_s, "Sum", rule.evaluation_periods, end_s
        )
        points = metric_math.datapoints(counts, points, rule.after_one_less, rule.threshold)
    known = [p for p in points if p is not None]
    return AlarmReading(alarm_state(rule, points), known[-1] if known else None, tuple(points))


def due(rule: AlarmRule, now_s: float) -> bool:
    """Whether `now_s` closes one of the alarm's periods (it is evaluated once a period)."""
    return math.isclose((now_s + 1e-9) % rule.period_s, 0.0, abs_tol=1e-6)
