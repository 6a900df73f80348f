"""How the deployed scaling policies decide, as pure functions over the metric history.

The rules (documented in the README's local-cloud table):
- Datapoints: the 10 s windows' ConcurrentRequestsPerModel maxima, grouped into an alarm's
  period (aligned to multiples of it) and reduced by its statistic; a period with no window
  is missing.
- An alarm is in ALARM when at least DatapointsToAlarm (default: EvaluationPeriods) of the last
  EvaluationPeriods complete periods breach; missing periods count as `TreatMissingData` says
  (breaching / notBreaching; ignore and missing skip them; all skipped: INSUFFICIENT_DATA).
- Target tracking, as AWS builds its alarms for the high-resolution predefined metric: scale
  out when 3 consecutive 10 s datapoints exceed the target, to ceil(desired × value / target)
  with value the last datapoint; scale in (unless DisableScaleIn) when 15 are below 90 % of it.
- Step scaling: while its alarm is in ALARM, the step whose interval holds (value − threshold)
  gives the adjustment (ChangeInCapacity, ExactCapacity, PercentChangeInCapacity).
- Cooldowns: a policy does not act again within its cooldown; no scale-in while a scale-out
  cooldown runs. Capacities are clamped to the scalable target's min and max; suspended
  directions do nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from tts_bench.deployment import TARGET_TRACKING_EVALUATION_PERIODS, TARGET_TRACKING_PERIOD_S

METRIC_PERIOD_S = TARGET_TRACKING_PERIOD_S
TRACKING_LOW_PERIODS = 15
TRACKING_LOW_RATIO = 0.9


class AlarmState(StrEnum):
    OK = "OK"
    ALARM = "ALARM"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


@dataclass(frozen=True)
class Datapoint:
    start_s: float
    value: float


@dataclass(frozen=True)
class AlarmRule:
    name: str
    statistic: str
    period_s: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str
    policy_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    lower: float | None
    upper: float | None
    adjustment: int


@dataclass(frozen=True)
class StepRule:
    policy_name: str
    adjustment_type: str
    steps: tuple[Step, ...]
    cooldown_s: float


@dataclass(frozen=True)
class TrackingRule:
    policy_name: str
    target_value: float
    scale_out_cooldown_s: float
    scale_in_cooldown_s: float
    disable_scale_in: bool

    def high_alarm(self, name: str) -> AlarmRule:
        return AlarmRule(
            name,
            "Maximum",
            METRIC_PERIOD_S,
            TARGET_TRACKING_EVALUATION_PERIODS,
            TARGET_TRACKING_EVALUATION_PERIODS,
            self.target_value,
            "GreaterThanThreshold",
            "missing",
        )

    def low_alarm(self, name: str) -> AlarmRule:
        return AlarmRule(
            name,
            "Maximum",
            METRIC_PERIOD_S,
            TRACKING_LOW_PERIODS,
            TRACKING_LOW_PERIODS,
            TRACKING_LOW_RATIO * self.target_value,
            "LessThanThreshold",
            "missing",
        )


def period_datapoints(
    windows: list[Datapoint], period_s: int, statistic: str, count: int, end_s: float
) -> list[float | None]:
    """The last `count` complete periods before `end_s`, oldest first (None: no data)."""
    last_end = math.floor(end_s / period_s) * period_s
    out: list[float | None] = []
    for index in range(count, 0, -1):
        start = last_end - index * period_s
        values = [w.value for w in windows if start <= w.start_s < start + period_s]
        out.append(_reduce(values, statistic) if values else None)
    return out


def _reduce(values: list[float], statistic: str) -> float:
    if statistic == "Maximum":
        return max(values)
    if statistic == "Minimum":
        return min(values)
    if statistic == "Sum":
        return sum(values)
    if statistic == "SampleCount":
        return float(len(values))
    return sum(values) / len(values)  # Average, and what this does not model


def breaches(value: float, comparison: str, threshold: float) -> bool:
    return {
        "GreaterThanThreshold": value > threshold,
        "GreaterThanOrEqualToThreshold": value >= threshold,
        "LessThanThreshold": value < threshold,
        "LessThanOrEqualToThreshold": value <= threshold,
    }[comparison]


def alarm_state(rule: AlarmRule, points: list[float | None]) -> AlarmState:
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


def last_value(points: list[float | None], fallback: float) -> float:
    known = [p for p in points if p is not None]
    return known[-1] if known else fallback


def tracking_capacity(desired: int, value: float, target: float) -> int:
    return max(1, math.ceil(desired * value / target - 1e-9))


def step_capacity(rule: StepRule, desired: int, delta: float) -> int | None:
    """The capacity the step policy asks for at `delta` = value − threshold (None: no step)."""
    for step in rule.steps:
        if delta > 0:
            inside = (step.lower is None or delta >= step.lower) and (
                step.upper is None or delta < step.upper
            )
        else:
            inside = (step.lower is None or delta > step.lower) and (
                step.upper is None or delta <= step.upper
            )
        if inside:
            if rule.adjustment_type == "ExactCapacity":
                return step.adjustment
            if rule.adjustment_type == "PercentChangeInCapacity":
                change = desired * step.adjustment / 100
                return desired + (math.ceil(change) if change > 0 else math.floor(change))
            return desired + step.adjustment
    return None


def clamp(capacity: int, low: int, high: int) -> int:
    return min(max(capacity, low), high)
