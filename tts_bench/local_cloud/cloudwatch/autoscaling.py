"""Application Auto Scaling for the local endpoint: the deployed policies, applied.

moto stores scalable targets, policies and alarms but evaluates none of them. After every 10 s
metric window the `Autoscaler` evaluates each alarm whose period that window closes on the local
cloud's own metric history, sets the alarms' states in moto, and hands the readings to
`planning.aws.scaling.ScalingEngine` (the statement of AWS's rules the simulator applies too),
which decides; a new desired count goes through `UpdateEndpointWeightsAndCapacities`, as
Application Auto Scaling sends it. The target-tracking policy's alarms are created in moto as
AWS creates them (`aws_scaling.tracking_alarms`, named `TargetTracking-<resource>-AlarmHigh-…`).
A step alarm on metric math is read back with `metric_math.parse` and computed per period from
the windows' Invocations and InvocationsPerInstance, as the simulator computes it; one whose
queries `parse` does not recognise (the emulation computes no other expression) is named and
left out.
Tests may scale cooldowns and alarm periods (`time_scale`), never below the 10 s metric period.
Each alarm state change and each capacity asked for is recorded, on the cloud's clock, in the
`ScalingHistory` that answers DescribeAlarmHistory and DescribeScalingActivities, at the instant
the evaluation is modelled at: its window's end plus the CloudWatch delay the cloud publishes
after (`delay_s`), not when this thread gets there (on a compressed clock a loaded machine's
tenth of a second is seconds); the alarm's state and the capacity change reach moto stamped
then too (`modelled_time`). A capacity change the endpoint refuses (it is Updating:
`ValidationException`) is a Failed activity with SageMaker's message; no cooldown starts, and
the alarm acts again at its next invocation, as Application Auto Scaling does. What AWS leaves
open is the cloud's variant set (`semantics`).

Scheduled actions (PutScheduledAction, stored by moto) run on the cloud's clock: after each
window, every action due since the last window sets the target's MinCapacity/MaxCapacity and
moves the desired count into them (`planning.aws.scheduled`), unless scheduled scaling is
suspended, when it is skipped for good, as AWS skips it. An action deployed before the cloud's
first window does not run for the past; a schedule the emulation cannot read is named once, at
deploy, and left out.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from tts_bench.deployment import SCALABLE_DIMENSION, SERVICE_NAMESPACE, resource_id
from tts_bench.local_cloud.cloudwatch.metrics import VariantMetrics
from tts_bench.local_cloud.cloudwatch.scaling_history import ScalingHistory
from tts_bench.local_cloud.modelled_time import modelled_at
from tts_bench.planning.aws import metric_math
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.aws.scheduled import (
    ScheduledAction,
    UnsupportedSchedule,
    due,
    fire_times,
    run_action,
)
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics
from tts_bench.telemetry import (
    CONCURRENT_REQUESTS_PER_MODEL,
    SAGEMAKER_INVOCATIONS_PER_INSTANCE,
    SAGEMAKER_NAMESPACE,
)

DEFAULT_COOLDOWN_S = 300  # Application Auto Scaling's default for a SageMaker variant


class Autoscaler:
    def __init__(
        self,
        client: Callable[[str], Any],
        metrics: VariantMetrics,
        endpoint: str,
        variant: str,
        time_scale: float,
        say: Callable[[str], None],
        history: ScalingHistory | None = None,
        semantics: AwsSemantics = DOCUMENTED,
        delay_s: float = 0.0,
    ) -> None:
        self._delay_s = delay_s  # the window's end to its evaluation, on the cloud's clock
        self.history = history or ScalingHistory()
        self._client = client
        self._metrics = metrics
        self._endpoint = endpoint
        self._variant = variant
        self._scale = time_scale
        self._say = say
        self._lock = threading.Lock()
        # Scaled like the alarm periods: an action repeats once a (scaled) minute, never more
        # often than the 10 s metric period.
        step = aws_scaling.METRIC_PERIOD_S
        repeat = max(step, round(semantics.action_repeat_s * time_scale / step) * step)
        self._semantics = replace(semantics, action_repeat_s=repeat)
        self._engine = aws_scaling.ScalingEngine((), self._semantics)
        self._states: dict[str, aws_scaling.AlarmState] = {}
        self._scheduled: tuple[ScheduledAction, ...] = ()
        self._schedule_since: float | None = None  # the end of the last window evaluated
        self.decisions: list[tuple[float, str, int, int]] = []  # (when, policy, from, to)
        self.refusals: list[tuple[float, str, int, int]] = []  # the endpoint refused these
        # (window end, alarm, new state); the history stamps each `delay_s` later
        self.transitions: list[tuple[float, str, str]] = []

    @property
    def _resource(self) -> str:
        return resource_id(self._endpoint, self._variant)

    # ------------------------------------------------------------------ the deployed rules

    def reload(self) -> None:
        """Read the deployed policies and alarms back from moto (after every deploy)."""
        policies = self._client("application-autoscaling").describe_scaling_policies(
            ServiceNamespace=SERVICE_NAMESPACE, ResourceId=self._resource
        )["ScalingPolicies"]
        alarms = self._client("cloudwatch").describe_alarms()["MetricAlarms"]
        rules: list[aws_scaling.Rule] = []
        for policy in policies:
            if policy["PolicyType"] == "TargetTrackingScaling":
                rules.append(self._tracking_rule(policy, alarms))
            elif policy["PolicyType"] == "StepScaling":
                rules += self._step_rules(policy, alarms)
        scheduled = self._read_scheduled()
        with self._lock:
            self._engine = self._engine.with_rules(tuple(rules))
            self._scheduled = scheduled
        if scheduled:
            self._say(f"autoscaling: {len(scheduled)} scheduled action(s) on the cloud's clock")
        if rules:
            self._say(
                "autoscaling: "
                + "; ".join(_describe(r) for r in rules)
                + (f" (times × {self._scale:g})" if self._scale != 1 else "")
            )

    def _read_scheduled(self) -> tuple[ScheduledAction, ...]:
        raw = self._client("application-autoscaling").describe_scheduled_actions(
            ServiceNamespace=SERVICE_NAMESPACE, ResourceId=self._resource
        )["ScheduledActions"]
        actions = []
        for a in raw:
            target = a.get("ScalableTargetAction") or {}
            action = ScheduledAction(
                a["ScheduledActionName"], a["Schedule"], a.get("Timezone") or "UTC",
                target.get("MinCapacity"), target.get("MaxCapacity"),
            )  # fmt: skip
            try:
                fire_times(action.schedule, action.timezone, 0.0, 0.0)
            except UnsupportedSchedule as exc:
                self._say(f"autoscaling: scheduled action {action.name} left out: {exc}")
                continue
            actions.append(action)
        return tuple(actions)

    def _scaled(self, alarm: aws_scaling.AlarmRule) -> aws_scaling.AlarmRule:
        step = aws_scaling.METRIC_PERIOD_S
        period = max(step, round(alarm.period_s * self._scale / step) * step)
        delay = aws_scaling.publication_delay_s(period, self._semantics)
        return replace(alarm, period_s=period, publication_delay=delay)

    def _tracking_rule(
        self, policy: dict[str, Any], alarms: list[dict[str, Any]]
    ) -> aws_scaling.TrackingRule:
        c = policy["TargetTrackingScalingPolicyConfiguration"]
        metric = (c.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType", "")
        target, disabled = float(c["TargetValue"]), bool(c.get("DisableScaleIn", False))
        names = (
            self._tracking_alarm_name("AlarmHigh", alarms),
            self._tracking_alarm_name("AlarmLow", alarms),
        )
        high, low = aws_scaling.tracking_alarms(metric, target, disabled, names, self._semantics)
        for alarm in (high, low):
            if alarm is not None:
                self._create_tracking_alarm(alarm, policy["PolicyARN"], alarms)
        return aws_scaling.TrackingRule(
            policy["PolicyName"], metric, target,
            float(c.get("ScaleOutCooldown", DEFAULT_COOLDOWN_S)) * self._scale,
            float(c.get("ScaleInCooldown", DEFAULT_COOLDOWN_S)) * self._scale,
            disabled, self._scaled(high), self._scaled(low) if low is not None else None,
        )  # fmt: skip

    def _tracking_alarm_name(self, kind: str, alarms: list[dict[str, Any]]) -> str:
        """AWS names the policy's alarms `TargetTracking-<resource>-AlarmHigh-<uuid>`."""
        prefix = f"TargetTracking-{self._resource}-{kind}-"
        existing = [a["AlarmName"] for a in alarms if a["AlarmName"].startswith(prefix)]
        return existing[0] if existing else prefix + secrets.token_hex(16)

    def _create_tracking_alarm(
        self, alarm: aws_scaling.AlarmRule, policy_arn: str, alarms: list[dict[str, Any]]
    ) -> None:
        if any(a["AlarmName"] == alarm.name for a in alarms):
            return
        self._client("cloudwatch").put_metric_alarm(
            AlarmName=alarm.name,
            Namespace=SAGEMAKER_NAMESPACE,
            MetricName=alarm.metric,
            Dimensions=[
                {"Name": "EndpointName", "Value": self._endpoint},
                {"Name": "VariantName", "Value": self._variant},
            ],
            Statistic=alarm.statistic,
            Period=alarm.period_s,
            EvaluationPeriods=alarm.evaluation_periods,
            DatapointsToAlarm=alarm.datapoints_to_alarm,
            Threshold=alarm.threshold,
            ComparisonOperator=alarm.comparison,
            AlarmActions=[policy_arn],
        )

    def _step_rules(
        self, policy: dict[str, Any], alarms: list[dict[str, Any]]
    ) -> list[aws_scaling.StepRule]:
        c = policy["StepScalingPolicyConfiguration"]
        steps = tuple(
            aws_scaling.Step(
                s.get("MetricIntervalLowerBound"),
                s.get("MetricIntervalUpperBound"),
                int(s["ScalingAdjustment"]),
            )
            for s in c["StepAdjustments"]
        )
        rules = []
        for alarm in alarms:
            if policy["PolicyARN"] not in alarm.get("AlarmActions", []):
                continue
            rule = _alarm_rule(alarm)
            if rule is None:
                self._say(
                    f"autoscaling: alarm {alarm['AlarmName']} left out: its metric queries are "
                    "not the fleet-aware expression the emulation computes"
                )
                continue
            rules.append(
                aws_scaling.StepRule(
                    policy["PolicyName"],
                    c["AdjustmentType"],
                    steps,
                    float(c.get("Cooldown", DEFAULT_COOLDOWN_S)) * self._scale,
                    self._scaled(rule),
                    c.get("MinAdjustmentMagnitude"),
                    c.get("MetricAggregationType") or "Average",
                )
            )
        return rules

    # ------------------------------------------------------------------ evaluating

    def evaluate(self, window_start_s: float) -> None:
        """One evaluation, after the window starting at `window_start_s` closed; what it records
        is stamped at its modelled instant, `delay_s` after the window's end."""
        end_s = window_start_s + aws_scaling.METRIC_PERIOD_S
        with modelled_at(end_s + self._delay_s):
            self._evaluate(end_s)

    def _evaluate(self, end_s: float) -> None:
        self._run_scheduled(end_s)
        with self._lock:
            engine = self._engine
        readings = self._readings(engine, end_s)
        if not readings:
            return
        target = self._scalable_target()
        if target is None:
            return
        low, high, suspended = target
        desired, status, in_service = self._endpoint_state()
        self.history.observe_endpoint(status, in_service, end_s + self._delay_s)
        paused = (
            bool(suspended.get("DynamicScalingOutSuspended")),
            bool(suspended.get("DynamicScalingInSuspended")),
        )
        with self._lock:
            action = self._engine.decide(end_s, readings, desired, (low, high), paused)
        if action is not None:
            self._apply(action, end_s)

    def _run_scheduled(self, end_s: float) -> None:
        """Run each scheduled action due since the last window, in time order."""
        with self._lock:
            since, self._schedule_since = self._schedule_since, end_s
            actions = self._scheduled
        if since is None or not actions:
            return
        for _, action in due(actions, since, end_s):
            target = self._scalable_target()
            if target is None:
                return
            low, high, suspended = target
            if suspended.get("ScheduledScalingSuspended"):
                self._say(f"autoscaling: {action.name} skipped: scheduled scaling is suspended")
                continue
            desired, _, _ = self._endpoint_state()
            try:
                low, high, after = run_action(action, low, high, desired)
            except UnsupportedSchedule as exc:
                self._say(f"autoscaling: {exc}; not run")
                continue
            self._client("application-autoscaling").register_scalable_target(
                ServiceNamespace=SERVICE_NAMESPACE, ResourceId=self._resource,
                ScalableDimension=SCALABLE_DIMENSION, MinCapacity=low, MaxCapacity=high,
            )  # fmt: skip
            self._say(f"autoscaling: {action.name}: min {low}, max {high}")
            if after != desired:
                reason = f"scheduled min {low}, max {high}"
                self._apply(aws_scaling.Action(action.name, reason, desired, after), end_s, False)

    def _readings(
        self, engine: aws_scaling.ScalingEngine, end_s: float
    ) -> dict[str, aws_scaling.AlarmReading]:
        """Each alarm whose period closes at `end_s`, read over the metric history; the states
        are set in moto as CloudWatch would."""
        windows = self._metrics.windows()
        invocations = [aws_scaling.Datapoint(w.start_s, w.invocations) for w in windows]
        history = {
            CONCURRENT_REQUESTS_PER_MODEL: [
                aws_scaling.Datapoint(w.start_s, w.concurrency_max) for w in windows
            ],
            SAGEMAKER_INVOCATIONS_PER_INSTANCE: [
                aws_scaling.Datapoint(w.start_s, w.invocations_per_instance) for w in windows
            ],
        }
        readings = {}
        for alarm in engine.alarms:
            if alarm.metric in history and aws_scaling.due(alarm, end_s):
                reading = aws_scaling.read_alarm(alarm, history[alarm.metric], end_s, invocations)
                if self._states.get(alarm.name) != reading.state:
                    self.transitions.append((end_s, alarm.name, reading.state.value))
                self._publish_state(alarm.name, reading, end_s + self._delay_s)
                readings[alarm.name] = reading
        return readings

    def _apply(self, action: aws_scaling.Action, when_s: float, policy: bool = True) -> None:
        """Send `action`'s desired count; `policy`: a policy's, whose engine learns a refusal."""
        self._say(
            f"autoscaling: {action.policy}: {action.reason}: desired {action.before} → {action.after}"
        )
        try:
            self._client("sagemaker").update_endpoint_weights_and_capacities(
                EndpointName=self._endpoint,
                DesiredWeightsAndCapacities=[
                    {"VariantName": self._variant, "DesiredInstanceCount": action.after}
                ],
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if error.get("Code") != "ValidationException":
                raise
            if policy:
                with self._lock:
                    self._engine.refused(action)
            message = f"{error.get('Code')}: {error.get('Message', '')}"
            self._say(f"autoscaling: {action.policy}: refused ({message}); tried again later")
            self.history.capacity_failed(
                self._resource, action.policy, action.alarm, action.before, action.after,
                when_s + self._delay_s, message,
            )  # fmt: skip
            self.refusals.append((when_s, action.policy, action.before, action.after))
            return
        self.history.capacity_set(
            self._resource, action.policy, action.alarm, action.before, action.after,
            when_s + self._delay_s,
        )  # fmt: skip
        self.decisions.append((when_s, action.policy, action.before, action.after))

    def _publish_state(self, name: str, reading: aws_scaling.AlarmReading, at_s: float) -> None:
        before = self._states.get(name, aws_scaling.AlarmState.INSUFFICIENT_DATA)
        if before == reading.state:
            return
        self._states[name] = reading.state
        self.history.alarm_changed(
            name, at_s, before.value, reading.state.value,
            f"datapoints {list(reading.points)}",
        )  # fmt: skip
        with contextlib.suppress(Exception):  # a redeploy may have deleted the alarm
            self._client("cloudwatch").set_alarm_state(
                AlarmName=name,
                StateValue=reading.state.value,
                StateReason=f"local cloud: datapoints {list(reading.points)}",
            )

    def _scalable_target(self) -> tuple[int, int, dict[str, bool]] | None:
        targets = self._client("application-autoscaling").describe_scalable_targets(
            ServiceNamespace=SERVICE_NAMESPACE, ResourceIds=[self._resource]
        )["ScalableTargets"]
        targets = [t for t in targets if t["ScalableDimension"] == SCALABLE_DIMENSION]
        if not targets:
            return None
        t = targets[0]
        return int(t["MinCapacity"]), int(t["MaxCapacity"]), dict(t.get("SuspendedState") or {})

    def _endpoint_state(self) -> tuple[int, str, int]:
        """The variant's desired count, the endpoint's status, the variant's InService count."""
        described = self._client("sagemaker").describe_endpoint(EndpointName=self._endpoint)
        status = str(described.get("EndpointStatus", ""))
        for variant in described["ProductionVariants"]:
            if variant["VariantName"] == self._variant:
                desired = int(variant.get("DesiredInstanceCount", 1))
                return desired, status, int(variant.get("CurrentInstanceCount") or 0)
        return 1, status, 0


def _alarm_rule(alarm: dict[str, Any]) -> aws_scaling.AlarmRule | None:
    """The alarm as the engine evaluates it; None for metric queries `metric_math` does not
    write (the emulation computes that expression only)."""
    math = None
    metric, statistic = alarm.get("MetricName", ""), alarm.get("Statistic", "Average")
    if alarm.get("Metrics"):
        parsed = metric_math.parse(alarm["Metrics"])
        if parsed is None:
            return None
        math, period = parsed
        metric, statistic = SAGEMAKER_INVOCATIONS_PER_INSTANCE, "Sum"
    else:
        period = int(alarm["Period"])
    return aws_scaling.AlarmRule(
        alarm["AlarmName"],
        metric,
        statistic,
        period,
        int(alarm["EvaluationPeriods"]),
        int(alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"]),
        float(alarm["Threshold"]),
        alarm["ComparisonOperator"],
        alarm.get("TreatMissingData", "missing"),
        after_one_less=math,
    )


def _describe(rule: aws_scaling.Rule) -> str:
    if isinstance(rule, aws_scaling.TrackingRule):
        return f"{rule.policy_name} target {rule.target_value:g} ({rule.predefined_metric})"
    return f"{rule.policy_name} on alarm {rule.alarm.name}"
