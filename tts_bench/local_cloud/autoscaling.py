"""Application Auto Scaling for the local endpoint: the deployed policies, applied.

moto stores scalable targets, policies and alarms but evaluates none of them. On every 10 s
metric window the `Autoscaler` reads the scalable target (min, max, suspended state) and the
endpoint's desired count from moto, evaluates the policies' alarms on the local cloud's own
metric history (`scaling_rules`), sets the alarms' states in moto, and asks for a new desired
count through `UpdateEndpointWeightsAndCapacities`, as Application Auto Scaling does. The
target-tracking policy's alarms are created in moto as AWS creates them. Cooldowns run on the
cloud's clock; each alarm state change and each capacity asked for is recorded in the
`ScalingHistory` that answers DescribeAlarmHistory and DescribeScalingActivities.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable
from typing import Any

from tts_bench.aws.clock import ServiceClock
from tts_bench.deployment import SCALABLE_DIMENSION, SERVICE_NAMESPACE, resource_id
from tts_bench.local_cloud import scaling_rules as rules
from tts_bench.local_cloud.metrics import VariantMetrics
from tts_bench.local_cloud.scaling_history import ScalingHistory
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, SAGEMAKER_NAMESPACE


class Autoscaler:
    def __init__(
        self,
        client: Callable[[str], Any],
        metrics: VariantMetrics,
        endpoint: str,
        variant: str,
        time_scale: float,
        say: Callable[[str], None],
        clock: ServiceClock | None = None,
        history: ScalingHistory | None = None,
    ) -> None:
        self._client = client
        self._clock = clock or ServiceClock()
        self.history = history or ScalingHistory()
        self._metrics = metrics
        self._endpoint = endpoint
        self._variant = variant
        self._scale = time_scale
        self._say = say
        self._lock = threading.Lock()
        self._tracking: list[
            tuple[rules.TrackingRule, rules.AlarmRule, rules.AlarmRule | None]
        ] = []
        self._steps: list[tuple[rules.StepRule, rules.AlarmRule]] = []
        self._states: dict[str, rules.AlarmState] = {}
        self._last_action: dict[str, float] = {}  # policy → when it last changed capacity
        self._last_scale_out = -1e18
        self._last_scale_out_cooldown = 0.0
        self.decisions: list[tuple[float, str, int, int]] = []  # (when, policy, from, to)

    @property
    def _resource(self) -> str:
        return resource_id(self._endpoint, self._variant)

    def reload(self) -> None:
        """Read the deployed policies and alarms back from moto (after every deploy)."""
        aas = self._client("application-autoscaling")
        cw = self._client("cloudwatch")
        policies = aas.describe_scaling_policies(
            ServiceNamespace=SERVICE_NAMESPACE, ResourceId=self._resource
        )["ScalingPolicies"]
        alarms = cw.describe_alarms()["MetricAlarms"]
        tracking: list[tuple[rules.TrackingRule, rules.AlarmRule, rules.AlarmRule | None]] = []
        steps: list[tuple[rules.StepRule, rules.AlarmRule]] = []
        for policy in policies:
            if policy["PolicyType"] == "TargetTrackingScaling":
                c = policy["TargetTrackingScalingPolicyConfiguration"]
                rule = rules.TrackingRule(
                    policy["PolicyName"],
                    float(c["TargetValue"]),
                    float(c.get("ScaleOutCooldown", 300)) * self._scale,
                    float(c.get("ScaleInCooldown", 300)) * self._scale,
                    bool(c.get("DisableScaleIn", False)),
                )
                high = self._tracking_alarm(rule, policy["PolicyARN"], "AlarmHigh", alarms)
                low = (
                    None
                    if rule.disable_scale_in
                    else self._tracking_alarm(rule, policy["PolicyARN"], "AlarmLow", alarms)
                )
                tracking.append((rule, high, low))
            elif policy["PolicyType"] == "StepScaling":
                c = policy["StepScalingPolicyConfiguration"]
                step_rule = rules.StepRule(
                    policy["PolicyName"],
                    c["AdjustmentType"],
                    tuple(
                        rules.Step(
                            s.get("MetricIntervalLowerBound"),
                            s.get("MetricIntervalUpperBound"),
                            int(s["ScalingAdjustment"]),
                        )
                        for s in c["StepAdjustments"]
                    ),
                    float(c.get("Cooldown", 300)) * self._scale,
                )
                for alarm in alarms:
                    if policy["PolicyARN"] in alarm.get("AlarmActions", []):
                        steps.append((step_rule, self._alarm_rule(alarm)))
        with self._lock:
            self._tracking, self._steps = tracking, steps
        if tracking or steps:
            self._say(
                "autoscaling: "
                + "; ".join(
                    [f"{r.policy_name} target {r.target_value:g}" for r, _, _ in tracking]
                    + [f"{r.policy_name} on alarm {a.name}" for r, a in steps]
                )
                + (f" (times × {self._scale:g})" if self._scale != 1 else "")
            )

    def _alarm_rule(self, alarm: dict[str, Any]) -> rules.AlarmRule:
        period = int(alarm["Period"])
        scaled = max(
            rules.METRIC_PERIOD_S,
            round(period * self._scale / rules.METRIC_PERIOD_S) * rules.METRIC_PERIOD_S,
        )
        return rules.AlarmRule(
            alarm["AlarmName"],
            alarm.get("Statistic", "Average"),
            scaled,
            int(alarm["EvaluationPeriods"]),
            int(alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"]),
            float(alarm["Threshold"]),
            alarm["ComparisonOperator"],
            alarm.get("TreatMissingData", "missing"),
        )

    def _tracking_alarm(
        self, rule: rules.TrackingRule, policy_arn: str, kind: str, alarms: list[dict[str, Any]]
    ) -> rules.AlarmRule:
        """AWS creates `TargetTracking-<resource>-AlarmHigh-<uuid>` for the policy; so do we."""
        prefix = f"TargetTracking-{self._resource}-{kind}-"
        existing = [a["AlarmName"] for a in alarms if a["AlarmName"].startswith(prefix)]
        name = existing[0] if existing else prefix + secrets.token_hex(16)
        alarm = rule.high_alarm(name) if kind == "AlarmHigh" else rule.low_alarm(name)
        if not existing:
            self._client("cloudwatch").put_metric_alarm(
                AlarmName=name,
                Namespace=SAGEMAKER_NAMESPACE,
                MetricName=CONCURRENT_REQUESTS_PER_MODEL,
                Dimensions=[
                    {"Name": "EndpointName", "Value": self._endpoint},
                    {"Name": "VariantName", "Value": self._variant},
                ],
                Statistic=alarm.statistic,
                Period=alarm.period_s,
                EvaluationPeriods=alarm.evaluation_periods,
                Threshold=alarm.threshold,
                ComparisonOperator=alarm.comparison,
                AlarmActions=[policy_arn],
            )
        return alarm

    # ------------------------------------------------------------------ evaluating

    def evaluate(self, window_start_s: float) -> None:
        """One evaluation, after the window starting at `window_start_s` closed."""
        end_s = window_start_s + rules.METRIC_PERIOD_S
        now = self._clock.now()
        with self._lock:
            tracking, steps = list(self._tracking), list(self._steps)
        if not tracking and not steps:
            return
        target = self._scalable_target()
        if target is None:
            return
        low, high, suspended = target
        desired, status, in_service = self._endpoint_state()
        self.history.observe_endpoint(status, in_service, now)
        history = [rules.Datapoint(w.start_s, w.concurrency_max) for w in self._metrics.windows()]
        wanted: tuple[str, str, int, str] | None = None  # (policy, reason, capacity, alarm)
        for rule, high_alarm, low_alarm in tracking:
            points = rules.period_datapoints(
                history, high_alarm.period_s, high_alarm.statistic,
                high_alarm.evaluation_periods, end_s,
            )  # fmt: skip
            if self._state(high_alarm, points) == rules.AlarmState.ALARM:
                value = rules.last_value(points, rule.target_value)
                capacity = rules.tracking_capacity(desired, value, rule.target_value)
                reason = (
                    f"{high_alarm.name}: {CONCURRENT_REQUESTS_PER_MODEL} {value:g} > "
                    f"{rule.target_value:g} for {high_alarm.evaluation_periods} × "
                    f"{high_alarm.period_s} s"
                )
                if capacity > desired and (wanted is None or capacity > wanted[2]):
                    wanted = (rule.policy_name, reason, capacity, high_alarm.name)
            if low_alarm is not None:
                points = rules.period_datapoints(
                    history, low_alarm.period_s, low_alarm.statistic,
                    low_alarm.evaluation_periods, end_s,
                )  # fmt: skip
                if self._state(low_alarm, points) == rules.AlarmState.ALARM and wanted is None:
                    value = rules.last_value(points, 0.0)
                    capacity = rules.tracking_capacity(desired, value, rule.target_value)
                    if capacity < desired:
                        reason = f"{low_alarm.name}: {value:g}"
                        wanted = (rule.policy_name, reason, capacity, low_alarm.name)
        for step_rule, alarm in steps:
            points = rules.period_datapoints(
                history, alarm.period_s, alarm.statistic, alarm.evaluation_periods, end_s
            )
            if self._state(alarm, points) != rules.AlarmState.ALARM or wanted is not None:
                continue
            value = rules.last_value(points, alarm.threshold)
            capacity = rules.step_capacity(step_rule, desired, value - alarm.threshold)
            if capacity is not None and capacity != desired:
                reason = (
                    f"{alarm.name}: {CONCURRENT_REQUESTS_PER_MODEL} {alarm.statistic} "
                    f"{value:g} {alarm.comparison} {alarm.threshold:g} for "
                    f"{alarm.evaluation_periods} × {alarm.period_s} s"
                )
                wanted = (step_rule.policy_name, reason, capacity, alarm.name)
        if wanted is None:
            return
        policy, reason, capacity, alarm_name = wanted
        capacity = rules.clamp(capacity, low, high)
        if capacity == desired:
            return
        out = capacity > desired
        if suspended.get("DynamicScalingOutSuspended" if out else "DynamicScalingInSuspended"):
            return
        cooldown = self._cooldown(policy, tracking, steps, out)
        if now - self._last_action.get(policy, -1e18) < cooldown:
            return
        if not out and now - self._last_scale_out < self._last_scale_out_cooldown:
            return  # no scale-in while a scale-out cooldown runs
        self._say(f"autoscaling: {policy}: {reason}: desired {desired} → {capacity}")
        self._client("sagemaker").update_endpoint_weights_and_capacities(
            EndpointName=self._endpoint,
            DesiredWeightsAndCapacities=[
                {"VariantName": self._variant, "DesiredInstanceCount": capacity}
            ],
        )
        self._last_action[policy] = now
        if out:
            self._last_scale_out, self._last_scale_out_cooldown = now, cooldown
        self.decisions.append((now, policy, desired, capacity))
        self.history.capacity_set(self._resource, policy, alarm_name, desired, capacity, now)

    def _cooldown(
        self,
        policy: str,
        tracking: list[tuple[rules.TrackingRule, rules.AlarmRule, rules.AlarmRule | None]],
        steps: list[tuple[rules.StepRule, rules.AlarmRule]],
        out: bool,
    ) -> float:
        for rule, _, _ in tracking:
            if rule.policy_name == policy:
                return rule.scale_out_cooldown_s if out else rule.scale_in_cooldown_s
        for step_rule, _ in steps:
            if step_rule.policy_name == policy:
                return step_rule.cooldown_s
        return 0.0

    def _state(self, alarm: rules.AlarmRule, points: list[float | None]) -> rules.AlarmState:
        state = rules.alarm_state(alarm, points)
        before = self._states.get(alarm.name, rules.AlarmState.INSUFFICIENT_DATA)
        if self._states.get(alarm.name) != state:
            self._states[alarm.name] = state
            if before != state:
                self.history.alarm_changed(
                    alarm.name, self._clock.now(), before.value, state.value, f"datapoints {points}"
                )
            with contextlib.suppress(Exception):  # a redeploy may have deleted the alarm
                self._client("cloudwatch").set_alarm_state(
                    AlarmName=alarm.name,
                    StateValue=state.value,
                    StateReason=f"local cloud: datapoints {points}",
                )
        return state

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
