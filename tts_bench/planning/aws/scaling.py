"""Application Auto Scaling and CloudWatch for a SageMaker variant: the one statement of their rules.

The simulator (`tts_bench.simulate.controller`) and the local cloud
(`tts_bench.local_cloud.cloudwatch.autoscaling`) both apply the deployed policies through this module, so
they cannot disagree. Each rule cites its AWS source; where AWS documents nothing the rule
says "assumption".

Metrics (AWS/SageMaker, dimensions EndpointName and VariantName):

- ConcurrentRequestsPerModel: the requests a model container holds (queued and executing,
  until the last byte), published every 10 s ("high resolution"); its predefined target-tracking
  metric is `SageMakerVariantConcurrentRequestsPerModelHighResolution` [SM-policy].
- InvocationsPerInstance: each request adds 1/N, N the variant's active instances at the time of
  the request [SM-metric], so per minute it is the requests per instance, load-linear by
  definition; a standard metric, published once a minute [SM-policy, SM-metrics-config]; its
  predefined metric is `SageMakerVariantInvocationsPerInstance`, its statistic Sum (the only
  valid one [CDK-canned]), and a target is invocations per instance per minute (CDK's
  `scaleOnInvocations` sets it to requests/s × 60 [CDK-invocations]). A request the container
  refuses (503) is still an invocation: SageMaker counts it and, apart, in Invocation5XXErrors.
- Publication: a high-resolution datapoint is assumed visible to its alarm at once; a standard
  one a period after it closes (assumption: AWS documents no figure).

Target tracking [AAS-tt]: Application Auto Scaling creates and manages two alarms per policy.
- AlarmHigh: `TRACKING_HIGH_DATAPOINTS` consecutive datapoints of the metric above the target
  (assumption for the count: AWS does not publish it; 3 is what its consoles show), one datapoint
  per metric period (for the high-resolution metric the period is an open point: 10 or 60 s).
- AlarmLow (absent with DisableScaleIn): the set's `tracking_low_datapoints` consecutive one-minute
  datapoints below `TRACKING_LOW_RATIO` of the target (assumption for the figures; AWS says
  scale-in waits for the metric to fall "typically more than 10 %" below the target, and that a
  high-resolution policy scales in at the standard metrics' speed [AAS-tt, SM-policy]).
- Both size proportionally: desired = ceil(C × value / target) [AAS-tt: "proportional to the
  metric"], value the newest datapoint, C the scalable dimension's current value, for SageMaker
  the DesiredInstanceCount (it counts instances still launching, while the metric counts only
  active ones).

Step scaling [AAS-step]: while its alarm is in ALARM, the step whose interval holds
value − threshold gives the adjustment: ChangeInCapacity, ExactCapacity or
PercentChangeInCapacity, the last rounded as EC2 Auto Scaling documents (above 1 down, between
0 and 1 to 1; assumed the same here) and raised to MinAdjustmentMagnitude.

Alarms [CW-eval]: an alarm is in ALARM when at least DatapointsToAlarm of its last
EvaluationPeriods datapoints breach; missing datapoints count as TreatMissingData says. An alarm
is evaluated once per period (assumption for the cadence). An Auto Scaling action is invoked on
the transition into ALARM and then "once per minute that the alarm remains in the new state"
[CW-actions]: a 10 s alarm that stays in ALARM acts at most once a minute, not every evaluation.

Cooldowns [AAS-tt-api, AAS-step-api]:
- scale-out: "while the scale-out cooldown period is in effect, the capacity added by the
  initiating scale-out activity is calculated as part of the desired capacity for the next
  scale-out activity": within the cooldown a scale-out is sized from the capacity the first one
  started from, and acts when it asks for more than the desired count. A later scale-out within
  the cooldown does not restart it (assumption). After the cooldown it is sized from the desired
  count again;
- scale-in: "scale-in activities are blocked until the cooldown period has expired. However, if
  another alarm triggers a scale-out activity during the cooldown period after a scale-in
  activity, Application Auto Scaling scales out the target immediately. In this case, the
  cooldown period for the scale-in activity stops and doesn't complete." No other rule blocks a
  scale-in: a running scale-out cooldown does not.

Several policies [AAS-tt, multiple policies]: "Application Auto Scaling scales out if any of the
target tracking policies are ready for scale out, but will scale in only if all of the target
tracking policies (with the scale-in portion enabled) are ready to scale in"; a step policy's
scale-in is its own alarm's and is not held back by target tracking. When several act at once
the largest capacity wins, for scale-out and for scale-in alike (assumption, as EC2 Auto Scaling
documents it).

Step scaling's value [AAS-step-api]: MetricAggregationType (Average when absent) aggregates the
alarm's evaluated datapoints into the value whose distance from the threshold picks the step.

The endpoint [SM-update]: a capacity change while the endpoint is Updating is refused
(`ValidationException: Cannot update in-progress endpoint`, as reported); Application Auto
Scaling records a failed scaling activity, starts no cooldown, and acts again at a later
invocation. Whether it is refused is a reading of `aws_semantics`, refused in both named sets.

What AWS leaves open (the high-resolution policy's detection, AlarmLow's datapoints, a standard
metric's publication delay, the refusal) is a field of `aws_semantics.AwsSemantics`; the engine,
`tracking_alarms` and `publication_delay_s` take the set. Every rule here and its source is
tabled in docs/aws-semantics.md.
Capacities are clamped to the scalable target's min and max; a suspended direction does nothing.

Sources:
- [SM-policy] https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-add-code-define.html
- [SM-metric] https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ScalingPolicyMetric.html
- [SM-metrics-config] https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_MetricsConfig.html
- [CDK-canned] aws-cdk-lib aws-sagemaker/lib/sagemaker-canned-metrics.generated (invocationsPerInstanceSum)
- [CDK-invocations] https://docs.aws.amazon.com/cdk/api/v2/docs/@aws-cdk_aws-sagemaker-alpha.InvocationsScalingProps.html
- [AAS-tt] https://docs.aws.amazon.com/autoscaling/application/userguide/target-tracking-scaling-policy-overview.html
- [AAS-tt-api] https://docs.aws.amazon.com/autoscaling/application/APIReference/API_TargetTrackingScalingPolicyConfiguration.html
- [AAS-step] https://docs.aws.amazon.com/autoscaling/application/userguide/application-auto-scaling-step-scaling-policies.html
- [AAS-step-api] https://docs.aws.amazon.com/autoscaling/application/APIReference/API_StepScalingPolicyConfiguration.html
- [SM-update] https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-delete.html (auto scaling is blocked while an endpoint update is in progress)
- [CW-eval] https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-evaluation.html
- [CW-actions] https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-actions.html
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from tts_bench.deployment import INVOCATIONS_TRACKING_METRIC, TARGET_TRACKING_METRIC
from tts_bench.planning.aws.alarms import (
    STANDARD_PERIOD_S,
    AlarmReading,
    AlarmRule,
    AlarmState,
    Datapoint,
    alarm_state,
    breaches,
    due,
    period_datapoints,
    publication_delay_s,
    read_alarm,
    reduce,
)
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics
from tts_bench.planning.rounding import ceil9
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, SAGEMAKER_INVOCATIONS_PER_INSTANCE

__all__ = [
    "STANDARD_PERIOD_S",
    "AlarmReading",
    "AlarmRule",
    "AlarmState",
    "Datapoint",
    "alarm_state",
    "breaches",
    "due",
    "period_datapoints",
    "publication_delay_s",
    "read_alarm",
]  # the alarms' part lives in planning.aws.alarms; callers keep reading it from here

HIGH_RESOLUTION_TRACKING: Final = TARGET_TRACKING_METRIC
INVOCATIONS_TRACKING: Final = INVOCATIONS_TRACKING_METRIC
METRIC_PERIOD_S: Final = 10  # the finest any SageMaker metric is published at
TRACKING_HIGH_DATAPOINTS: Final = 3
TRACKING_LOW_PERIOD_S: Final = 60
TRACKING_LOW_RATIO: Final = 0.9
STANDARD_PUBLICATION_DELAY_S: Final = DOCUMENTED.standard_publication_delay_s


@dataclass(frozen=True)
class PredefinedMetric:
    """What a predefined target-tracking metric reads: the CloudWatch metric, its statistic and
    period, and how long after a period closes its datapoint reaches the alarm."""

    metric: str
    statistic: str
    period_s: int
    publication_delay_s: int


PREDEFINED_METRICS: Final[Mapping[str, PredefinedMetric]] = {
    HIGH_RESOLUTION_TRACKING: PredefinedMetric(CONCURRENT_REQUESTS_PER_MODEL, "Maximum", 10, 0),
    INVOCATIONS_TRACKING: PredefinedMetric(
        SAGEMAKER_INVOCATIONS_PER_INSTANCE, "Sum", STANDARD_PERIOD_S, STANDARD_PUBLICATION_DELAY_S
    ),
}


def predefined_metric_of(name: str, semantics: AwsSemantics = DOCUMENTED) -> PredefinedMetric:
    """What a predefined metric's AlarmHigh reads under `semantics` (the high-resolution
    metric's period and a standard metric's publication delay are open points)."""
    metric = PREDEFINED_METRICS[name]
    if name == HIGH_RESOLUTION_TRACKING:
        period = semantics.high_resolution_tracking_period_s
        return replace(metric, period_s=period, publication_delay_s=publication_delay_s(
            period, semantics
        ))  # fmt: skip
    return replace(metric, publication_delay_s=publication_delay_s(metric.period_s, semantics))


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
    alarm: AlarmRule
    min_adjustment_magnitude: int | None = None
    aggregation: str = "Average"  # MetricAggregationType; AWS's default when absent


@dataclass(frozen=True)
class TrackingRule:
    policy_name: str
    predefined_metric: str
    target_value: float
    scale_out_cooldown_s: float
    scale_in_cooldown_s: float
    disable_scale_in: bool
    high: AlarmRule
    low: AlarmRule | None

    @property
    def alarms(self) -> tuple[AlarmRule, ...]:
        return (self.high,) if self.low is None else (self.high, self.low)


Rule = TrackingRule | StepRule


def tracking_alarms(
    predefined_metric: str,
    target: float,
    disable_scale_in: bool,
    names: tuple[str, str] = ("AlarmHigh", "AlarmLow"),
    semantics: AwsSemantics = DOCUMENTED,
) -> tuple[AlarmRule, AlarmRule | None]:
    """AlarmHigh and AlarmLow as Application Auto Scaling builds them for a predefined metric,
    under the set's reading of what AWS leaves open."""
    metric = predefined_metric_of(predefined_metric, semantics)
    high = AlarmRule(
        names[0], metric.metric, metric.statistic, metric.period_s,
        TRACKING_HIGH_DATAPOINTS, TRACKING_HIGH_DATAPOINTS, target, "GreaterThanThreshold",
        "missing", metric.publication_delay_s,
    )  # fmt: skip
    if disable_scale_in:
        return high, None
    low_period = max(metric.period_s, TRACKING_LOW_PERIOD_S)
    datapoints = semantics.tracking_low_datapoints
    low = AlarmRule(
        names[1], metric.metric, metric.statistic, low_period,
        datapoints, datapoints, TRACKING_LOW_RATIO * target,
        "LessThanThreshold", "missing", publication_delay_s(low_period, semantics),
    )  # fmt: skip
    return high, low


# --------------------------------------------------------------------------- capacities


def tracking_capacity(base: int, value: float, target: float) -> int:
    """Target tracking's proportional sizing: the capacity that brings `value` to `target`."""
    return max(1, ceil9(base * value / target))


def _percent_change(base: int, percent: int, minimum: int | None) -> int:
    change = base * percent / 100
    if 0 < change < 1:
        change = 1
    elif -1 < change < 0:
        change = -1
    rounded = math.floor(change + 1e-9) if change > 0 else math.ceil(change - 1e-9)
    if minimum is not None and 0 < abs(rounded) < minimum:
        rounded = minimum if rounded > 0 else -minimum
    return base + rounded


def step_capacity(rule: StepRule, base: int, delta: float) -> int | None:
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
        if not inside:
            continue
        if rule.adjustment_type == "ExactCapacity":
            return step.adjustment
        if rule.adjustment_type == "PercentChangeInCapacity":
            return _percent_change(base, step.adjustment, rule.min_adjustment_magnitude)
        return base + step.adjustment
    return None


def clamp(capacity: int, low: int, high: int) -> int:
    return min(max(capacity, low), high)


# --------------------------------------------------------------------------- the engine


@dataclass(frozen=True)
class Action:
    """A change of the desired count one policy asked for (already clamped and allowed)."""

    policy: str
    reason: str
    before: int
    after: int
    alarm: str = ""  # the alarm whose state asked for it

    @property
    def out(self) -> bool:
        return self.after > self.before


@dataclass(frozen=True)
class _Wanted:
    policy: str
    capacity: int
    reason: str
    alarm: str
    out: bool  # the direction its alarm asks for: a scale-out never turns into a scale-in


@dataclass
class _OutCooldown:
    until_s: float
    base: int  # the capacity the scale-out that started it began from


@dataclass
class ScalingEngine:
    """Alarm actions, cooldowns and the choice among policies over one scalable target, under
    one reading of what AWS leaves open; methods change state.

    Callers evaluate the alarms (`read_alarm`, over their own metric history), hand the readings
    to `decide`, and apply the `Action` it returns; `decide` records the action as taken. Where
    the endpoint refuses it (Updating), the caller says so with `refused`, which takes the record
    back: a failed scaling activity starts no cooldown, and the alarm acts again at its next
    invocation.
    """

    rules: tuple[Rule, ...]
    semantics: AwsSemantics = DOCUMENTED
    _out: dict[str, _OutCooldown] = field(default_factory=dict)
    _last_in_s: dict[str, float] = field(default_factory=dict)
    _states: dict[str, AlarmState] = field(default_factory=dict)  # each alarm's last reading
    _invoked_s: dict[str, float] = field(default_factory=dict)  # each alarm's last action
    _before: tuple[dict[str, _OutCooldown], dict[str, float]] | None = None

    @property
    def alarms(self) -> tuple[AlarmRule, ...]:
        return tuple(
            a for r in self.rules for a in (r.alarms if isinstance(r, TrackingRule) else (r.alarm,))
        )

    def with_rules(self, rules: tuple[Rule, ...]) -> ScalingEngine:
        """Other rules (a redeploy), the cooldowns and alarm states of policies that stay kept."""
        names = {r.policy_name for r in rules}
        alarms = {
            a.name for r in rules for a in (r.alarms if isinstance(r, TrackingRule) else (r.alarm,))
        }
        return type(self)(
            rules,
            self.semantics,
            {k: v for k, v in self._out.items() if k in names},
            {k: v for k, v in self._last_in_s.items() if k in names},
            {k: v for k, v in self._states.items() if k in alarms},
            {k: v for k, v in self._invoked_s.items() if k in alarms},
        )

    def _base(self, policy: str, now_s: float, desired: int) -> int:
        cooldown = self._out.get(policy)
        return cooldown.base if cooldown is not None and now_s < cooldown.until_s else desired

    def _invocations(self, now_s: float, readings: Mapping[str, AlarmReading]) -> set[str]:
        """The alarms whose action is invoked at `now_s` [CW-actions]: on entering ALARM, then
        once per `action_repeat_s` while they stay there."""
        invoked = set()
        for name, reading in readings.items():
            before = self._states.get(name)
            self._states[name] = reading.state
            if reading.state is not AlarmState.ALARM:
                continue
            last = self._invoked_s.get(name)
            repeat = self.semantics.action_repeat_s
            if before is not AlarmState.ALARM or last is None or now_s - last >= repeat - 1e-6:
                invoked.add(name)
                self._invoked_s[name] = now_s
        return invoked

    def _wanted(
        self, rule: Rule, readings: Mapping[str, AlarmReading], invoked: set[str], now_s: float,
        desired: int,
    ) -> Iterable[_Wanted]:  # fmt: skip
        if isinstance(rule, TrackingRule):
            high = readings.get(rule.high.name) if rule.high.name in invoked else None
            if high is not None and high.value is not None:
                base = self._base(rule.policy_name, now_s, desired)
                capacity = tracking_capacity(base, high.value, rule.target_value)
                yield _Wanted(
                    rule.policy_name, capacity, _above(rule.high, high.value), rule.high.name, True
                )
            low = None
            if rule.low is not None and rule.low.name in invoked:
                low = readings.get(rule.low.name)
            if low is not None and low.value is not None:
                capacity = tracking_capacity(desired, low.value, rule.target_value)
                yield _Wanted(
                    rule.policy_name, capacity, _above(rule.low, low.value), rule.low.name, False
                )
            return
        reading = readings.get(rule.alarm.name) if rule.alarm.name in invoked else None
        if reading is None:
            return
        value = _aggregated(reading, rule.aggregation)
        if value is None:
            value = rule.alarm.threshold
        delta = value - rule.alarm.threshold
        capacity = step_capacity(rule, desired, delta)
        out = capacity is not None and capacity > desired
        if out:  # a scale-out: sized as cooldowns say, so within one it may ask for no more
            capacity = step_capacity(rule, self._base(rule.policy_name, now_s, desired), delta)
        if capacity is not None:
            reason = _above(rule.alarm, value)
            yield _Wanted(rule.policy_name, capacity, reason, rule.alarm.name, out)

    def _scale_in_allowed(self, rule: Rule, now_s: float) -> bool:
        cooldown = rule.scale_in_cooldown_s if isinstance(rule, TrackingRule) else rule.cooldown_s
        return now_s - self._last_in_s.get(rule.policy_name, -math.inf) >= cooldown

    def _tracking_ready_in(self, now_s: float) -> bool:
        """Whether every target-tracking policy with scale-in enabled is ready to scale in: its
        AlarmLow in ALARM and its scale-in cooldown over [AAS-tt, multiple policies]."""
        return all(
            self._states.get(rule.low.name) is AlarmState.ALARM
            and self._scale_in_allowed(rule, now_s)
            for rule in self.rules
            if isinstance(rule, TrackingRule) and rule.low is not None
        )

    def decide(
        self,
        now_s: float,
        readings: Mapping[str, AlarmReading],
        desired: int,
        bounds: tuple[int, int],
        suspended: tuple[bool, bool] = (False, False),
    ) -> Action | None:
        """The action the policies take at `now_s`, if any. `suspended` is (out, in)."""
        invoked = self._invocations(now_s, readings)
        outs: list[_Wanted] = []
        ins: list[_Wanted] = []
        tracking_ready = self._tracking_ready_in(now_s)
        for rule in self.rules:
            for wanted in self._wanted(rule, readings, invoked, now_s, desired):
                capacity = clamp(wanted.capacity, *bounds)
                if wanted.out:
                    if capacity > desired:
                        outs.append(replace(wanted, capacity=capacity))
                elif capacity < desired and self._scale_in_allowed(rule, now_s):
                    if isinstance(rule, TrackingRule) and not tracking_ready:
                        continue
                    ins.append(replace(wanted, capacity=capacity))
        chosen = max(outs or ins, key=lambda w: w.capacity, default=None)
        if chosen is None or suspended[0 if outs else 1]:
            return None
        action = Action(chosen.policy, chosen.reason, desired, chosen.capacity, chosen.alarm)
        self._record(action, now_s)
        return action

    def refused(self, action: Action) -> None:
        """The endpoint refused `action` (it was Updating): no cooldown starts, as for a failed
        scaling activity; its alarm acts again at its next invocation."""
        if self._before is not None:
            self._out, self._last_in_s = self._before
            self._before = None

    def _record(self, action: Action, now_s: float) -> None:
        self._before = (dict(self._out), dict(self._last_in_s))
        rule = next(r for r in self.rules if r.policy_name == action.policy)
        if not action.out:
            self._last_in_s[action.policy] = now_s
            return
        # A scale-out stops every scale-in cooldown, which "doesn't complete" [AAS-tt-api].
        self._last_in_s.clear()
        running = self._out.get(action.policy)
        if running is None or now_s >= running.until_s:
            cooldown = (
                rule.scale_out_cooldown_s if isinstance(rule, TrackingRule) else rule.cooldown_s
            )
            self._out[action.policy] = _OutCooldown(now_s + cooldown, action.before)


def _aggregated(reading: AlarmReading, aggregation: str) -> float | None:
    """A step policy's value: its MetricAggregationType over the alarm's evaluated datapoints
    [AAS-step-api]; the newest when the reading carries no datapoints."""
    known = [p for p in reading.points if p is not None]
    if not known:
        return reading.value
    return reduce(known, aggregation)


def _above(alarm: AlarmRule, value: float) -> str:
    return (
        f"{alarm.name}: {alarm.metric} {alarm.statistic} {value:g} {alarm.comparison} "
        f"{alarm.threshold:g} ({alarm.datapoints_to_alarm} of {alarm.evaluation_periods} × "
        f"{alarm.period_s} s)"
    )
