"""A plan's deploy shape: built for each rule, read back for every plan, turned into AWS rules.

`published_shape` is SPEC §6's deploy shape (target tracking on the high-resolution concurrency
metric with scale-in disabled, plus a step scale-in on its own alarm); the fleet rule builds its
own (`fleet_rule`). `deploy_shape_of` reads any plan's shape, a version 1 plan's from its
thresholds and `tts_bench.deployment`, as it was deployed. `engine_rules` turns a shape into
`aws_scaling` rules, the form the simulator and the local cloud apply. `detection_shape` is a
shape's structure, what an organic ttotal's measured detection lag depends on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tts_bench import deployment
from tts_bench.artifacts.cloudwatch import CloudWatchUnits
from tts_bench.artifacts.plan import (
    AfterOneLess,
    AlarmSpec,
    DeployShape,
    PlanArtifact,
    StepAdjustment,
    StepSpec,
    TargetTrackingSpec,
)
from tts_bench.planning.aws import metric_math
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.aws.scheduled import ScheduledAction, recurring_cron
from tts_bench.planning.aws.semantics import AwsSemantics
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL


def alarm_spec(rule: aws_scaling.AlarmRule) -> AlarmSpec:
    math = rule.after_one_less
    return AlarmSpec(
        after_one_less=None if math is None else AfterOneLess(min_fleet=math.min_fleet),
        metric=rule.metric,  # type: ignore[arg-type]
        statistic=rule.statistic,  # type: ignore[arg-type]
        period_s=rule.period_s,
        evaluation_periods=rule.evaluation_periods,
        datapoints_to_alarm=rule.datapoints_to_alarm,
        comparison=rule.comparison,  # type: ignore[arg-type]
        threshold=rule.threshold,
        treat_missing_data=rule.treat_missing,  # type: ignore[arg-type]
    )


def alarm_rule(name: str, spec: AlarmSpec) -> aws_scaling.AlarmRule:
    math = spec.after_one_less
    return aws_scaling.AlarmRule(
        name, spec.metric, spec.statistic, spec.period_s, spec.evaluation_periods,
        spec.datapoints_to_alarm, spec.threshold, spec.comparison, spec.treat_missing_data,
        after_one_less=None if math is None else metric_math.of(math),
    )  # fmt: skip


def tracking_spec(
    role: str,
    predefined_metric: str,
    target: float,
    *,
    disable_scale_in: bool,
    scale_out_cooldown_s: int,
    scale_in_cooldown_s: int | None,
) -> TargetTrackingSpec:
    """A target-tracking policy with its alarms as Application Auto Scaling builds them."""
    high, low = aws_scaling.tracking_alarms(predefined_metric, target, disable_scale_in)
    return TargetTrackingSpec(
        role=role,  # type: ignore[arg-type]
        predefined_metric=predefined_metric,  # type: ignore[arg-type]
        target_value=target,
        disable_scale_in=disable_scale_in,
        scale_out_cooldown_s=scale_out_cooldown_s,
        scale_in_cooldown_s=scale_in_cooldown_s,
        high_alarm=alarm_spec(high),
        low_alarm=alarm_spec(low) if low is not None else None,
    )


def published_shape(
    *,
    target_value: float,
    scale_in_threshold: float,
    scale_in_units: CloudWatchUnits,
    scale_out_cooldown_s: int,
    scale_in_cooldown_s: int,
    launch_s: float,
    sizing_rps: float,
) -> DeployShape:
    """SPEC §6's deploy shape: scale out by target tracking on the high-resolution concurrency
    metric (scale-in disabled); scale in one instance when our alarm, reading the statistic and
    period the threshold's ratio was measured for, stays at or below it for 3 periods."""
    tracking = tracking_spec(
        "concurrency-target",
        deployment.TARGET_TRACKING_METRIC,
        target_value,
        disable_scale_in=True,
        scale_out_cooldown_s=scale_out_cooldown_s,
        scale_in_cooldown_s=None,
    )
    scale_in = StepSpec(
        role="scale-in",
        adjustment_type="ChangeInCapacity",
        steps=[StepAdjustment(lower=None, upper=0.0, adjustment=deployment.SCALE_IN_ADJUSTMENT)],
        cooldown_s=scale_in_cooldown_s,
        metric_aggregation_type=scale_in_units.statistic,  # type: ignore[arg-type]
        alarm=AlarmSpec(
            metric=CONCURRENT_REQUESTS_PER_MODEL,
            statistic=scale_in_units.statistic,
            period_s=scale_in_units.period_s,
            evaluation_periods=deployment.SCALE_IN_EVALUATION_PERIODS,
            datapoints_to_alarm=deployment.SCALE_IN_EVALUATION_PERIODS,
            comparison=deployment.SCALE_IN_COMPARISON,
            threshold=scale_in_threshold,
            # An idle variant publishes no concurrency at all: that is low concurrency.
            treat_missing_data="breaching",
        ),
    )
    return DeployShape(policies=[tracking, scale_in], launch_s=launch_s, sizing_rps=sizing_rps)


def deploy_shape_of(plan: PlanArtifact) -> DeployShape:
    """The plan's deploy shape; a version 1 plan's is the published one its fields describe,
    launched one policy-lag bound (SPEC §4: 60 s) before its planned T_total."""
    if plan.deploy is not None:
        return plan.deploy
    sizing = plan.finding("fleet_sizing")
    rate = sizing.figure("throughput_at_trigger_rps") if sizing else 0.0
    return published_shape(
        target_value=plan.scaling_target_value,
        scale_in_threshold=plan.scale_in_threshold,
        scale_in_units=plan.scale_in_units,
        scale_out_cooldown_s=plan.scale_out_cooldown_s,
        scale_in_cooldown_s=plan.scale_in_cooldown_s,
        launch_s=max(plan.inputs.planned_total_s - deployment.DEFAULT_POLICY_LAG_BOUND_S, 1.0),
        sizing_rps=float(rate or 0.0),
    )


# The time zone a plan's schedule is deployed in, by the UTC offset the plan states.
SCHEDULE_TIMEZONES = {"+00:00": "Etc/UTC"}


def scheduled_actions_of(
    plan: PlanArtifact,
    bounds: deployment.OperatorBounds | None,
    endpoint: str,
    variant: str = deployment.DEFAULT_VARIANT,
) -> tuple[ScheduledAction, ...]:
    """The plan's schedule as scheduled actions on the variant's target: each step a cron at its
    time, again every period of the day (`recurring_cron`), that sets MinCapacity to the step's (clamped, like the target's own min, into
    the operator's bounds) and MaxCapacity to the target's, so no action can leave min above
    max. Nothing for a plan without a schedule: it deploys exactly as before schedules."""
    if plan.schedule is None:
        return ()
    low, high = (
        bounds.clamp(plan.min_instances, plan.max_instances)
        if bounds
        else (plan.min_instances, plan.max_instances)
    )
    timezone = SCHEDULE_TIMEZONES[plan.schedule.utc_offset]
    return tuple(
        ScheduledAction(
            name=deployment.scheduled_action_name(endpoint, variant, step.at_utc),
            schedule=recurring_cron(step.at_s, plan.schedule.period_s),
            timezone=timezone,
            min_capacity=min(max(step.min_capacity, low), high),
            max_capacity=high,
        )
        for step in plan.schedule.steps
    )


def engine_rules(
    shape: DeployShape,
    names: Callable[[str], str] = lambda role: role,
    scale: float = 1.0,
    semantics: AwsSemantics | None = None,
) -> tuple[aws_scaling.Rule, ...]:
    """The shape's policies as `aws_scaling` rules, policy `names(role)`, cooldowns × `scale`.
    With `semantics`, target tracking's alarms are built as that reading says AWS builds them
    and every alarm's publication delay is the set's; without, as the plan recorded them."""
    rules: list[aws_scaling.Rule] = []

    def alarm(name: str, spec: AlarmSpec) -> aws_scaling.AlarmRule:
        rule = alarm_rule(name, spec)
        if semantics is None:
            return rule
        return replace(rule, publication_delay=aws_scaling.publication_delay_s(
            rule.period_s, semantics
        ))  # fmt: skip

    for policy in shape.policies:
        name = names(policy.role)
        if isinstance(policy, TargetTrackingSpec):
            low_spec = policy.low_alarm
            high = alarm_rule(f"{name}-AlarmHigh", policy.high_alarm)
            low = alarm_rule(f"{name}-AlarmLow", low_spec) if low_spec is not None else None
            if semantics is not None:
                high, low = aws_scaling.tracking_alarms(
                    policy.predefined_metric, policy.target_value, policy.disable_scale_in,
                    (f"{name}-AlarmHigh", f"{name}-AlarmLow"), semantics,
                )  # fmt: skip
            rules.append(
                aws_scaling.TrackingRule(
                    name,
                    policy.predefined_metric,
                    policy.target_value,
                    policy.scale_out_cooldown_s * scale,
                    (policy.scale_in_cooldown_s or 0) * scale,
                    policy.disable_scale_in,
                    high,
                    low,
                )
            )
            continue
        rules.append(
            aws_scaling.StepRule(
                name,
                policy.adjustment_type,
                tuple(aws_scaling.Step(s.lower, s.upper, s.adjustment) for s in policy.steps),
                policy.cooldown_s * scale,
                alarm(f"{name}-alarm", policy.alarm),
                policy.min_adjustment_magnitude,
                policy.metric_aggregation_type,
            )
        )
    return tuple(rules)


def _alarm_structure(alarm: AlarmSpec) -> str:
    math = alarm.after_one_less
    metric = (
        alarm.metric
        if math is None
        else f"{alarm.metric} with one instance fewer (Invocations ÷ it; from "
        f"{math.min_fleet} instances)"
    )
    return (
        f"{metric} {alarm.statistic} {alarm.period_s} s, {alarm.datapoints_to_alarm} of "
        f"{alarm.evaluation_periods} {alarm.comparison} (missing: {alarm.treat_missing_data})"
    )


def detection_shape(shape: DeployShape) -> str:
    """The shape's structure: each policy's kind, role, metric and alarms (statistic, period,
    datapoints, comparison), without the numbers derived from the measurements (targets,
    thresholds, steps, cooldowns, launch). How long a first scale-out takes to be detected
    depends on the structure alone, and the numbers change with the very T_total a lag goes
    into, so a plan re-derived with a measured lag keeps the structure it was measured under."""
    parts = []
    for policy in sorted(shape.policies, key=lambda p: p.role):
        if isinstance(policy, TargetTrackingSpec):
            low = policy.low_alarm
            alarms = f"high {_alarm_structure(policy.high_alarm)}" + (
                f"; low {_alarm_structure(low)}" if low is not None else "; scale-in disabled"
            )
            parts.append(f"{policy.role}: target tracking on {policy.predefined_metric} ({alarms})")
        else:
            parts.append(
                f"{policy.role}: step {policy.adjustment_type} ({_alarm_structure(policy.alarm)})"
            )
    return "; ".join(parts)


def tracking_role(shape: DeployShape) -> str | None:
    """The role of the shape's target-tracking policy, whose detection lag a plan plans for."""
    return next((p.role for p in shape.policies if isinstance(p, TargetTrackingSpec)), None)
