"""`validate`: the deployed scaling settings against a plan's, side by side with a verdict each.

`compare_to_plan` is pure: a `DeployedSnapshot` and a `PlanArtifact` (its min/max clamped into
the operator's bounds when given, as the stack deploys them) in, one `Comparison` per setting
out. A `--schedule` plan's scheduled actions are one setting (all of them as one line), and its
min instances is the MinCapacity its schedule holds at the snapshot's time (the last action due
within the week before it); a plan without a schedule gets the row only when the target has a
scheduled action, which then differs from its "none". The first rows are what the plan was
measured on, from its fingerprint: the image digest, or a model package's versioned ARN and the
network isolation it runs under (a package plan has no `MAX_QUEUE_DEPTH` row: the vendor's
container reads no bound of ours). `drift --plan` reuses it. `read_and_compare` is the thin
edge that reads the snapshot with boto3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from tts_bench.artifacts.plan import AlarmSpec, PlanArtifact, StepSpec, TargetTrackingSpec
from tts_bench.aws.deployed import (
    Alarm,
    DeployedScheduledAction,
    DeployedSnapshot,
    ScalingPolicy,
    Variant,
    read_snapshot,
)
from tts_bench.aws.session import AwsSession
from tts_bench.deployment import (
    DEFAULT_VARIANT,
    OperatorBounds,
    policy_name,
    step_alarm_name,
)
from tts_bench.errors import RefusalError
from tts_bench.planning.aws import metric_math
from tts_bench.planning.aws.scheduled import DAY, ScheduledAction, held_at
from tts_bench.planning.deploy import deploy_shape_of, scheduled_actions_of
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH

Number = int | float
Planned = Number | str


class Setting(StrEnum):
    """The deployed settings a plan decides, in the order they are reported (those a plan's
    deploy shape has: a published plan has no burst and no scale-in expression)."""

    # What the plan was measured on (its fingerprint): an image's digest, or a vendor's model
    # package (its versioned ARN), which runs only network-isolated.
    IMAGE_DIGEST = "image digest"
    MODEL_PACKAGE = "model package"
    NETWORK_ISOLATION = "network isolation"
    TARGET_VALUE = "target value"
    SCALE_IN_THRESHOLD = "scale-in threshold"
    SCALE_OUT_COOLDOWN = "scale-out cooldown (s)"
    SCALE_IN_COOLDOWN = "scale-in cooldown (s)"
    MIN_INSTANCES = "min instances"
    MAX_INSTANCES = "max instances"
    # A threshold is a number in one statistic's units: what reads it must use that statistic.
    TARGET_STATISTIC = "target statistic"
    TARGET_PERIOD = "target period (s)"
    SCALE_IN_STATISTIC = "scale-in statistic"
    SCALE_IN_PERIOD = "scale-in period (s)"
    TARGET_METRIC = "target metric"
    TARGET_DATAPOINTS = "target datapoints"
    # Target tracking's own scale-in (a fleet plan's, for fleets under its step's minimum): the
    # AlarmLow Application Auto Scaling builds, and the policy's ScaleInCooldown.
    TRACKING_SCALE_IN_THRESHOLD = "tracking scale-in threshold"
    TRACKING_SCALE_IN_STATISTIC = "tracking scale-in statistic"
    TRACKING_SCALE_IN_PERIOD = "tracking scale-in period (s)"
    TRACKING_SCALE_IN_DATAPOINTS = "tracking scale-in datapoints"
    TRACKING_SCALE_IN_COOLDOWN = "tracking scale-in cooldown (s)"
    SCALE_IN_DATAPOINTS = "scale-in datapoints"
    # The fleet-aware alarm's metric math (`planning.aws.metric_math`): min fleet and
    # threshold are in its text; "none" for a plan whose alarm reads one metric.
    SCALE_IN_EXPRESSION = "scale-in expression"
    SCALE_IN_STEP = "scale-in step"
    BURST_THRESHOLD = "burst threshold"
    BURST_STATISTIC = "burst statistic"
    BURST_PERIOD = "burst period (s)"
    BURST_DATAPOINTS = "burst datapoints"
    BURST_COOLDOWN = "burst cooldown (s)"
    BURST_STEP = "burst step"
    SCHEDULE = "scheduled actions"
    QUEUE_MAX_DEPTH = ENV_MAX_QUEUE_DEPTH


IDENTITY_SETTINGS = (Setting.IMAGE_DIGEST, Setting.MODEL_PACKAGE, Setting.NETWORK_ISOLATION)
SCALING_SETTINGS = tuple(
    s for s in Setting if s is not Setting.QUEUE_MAX_DEPTH and s not in IDENTITY_SETTINGS
)
ISOLATED, NOT_ISOLATED = "enabled", "disabled"


NO_SCHEDULE = "none"
NO_EXPRESSION = "none"


class Outcome(StrEnum):
    MATCH = "match"
    MISMATCH = "mismatch"
    MISSING = "missing"  # nothing deployed where the plan expects a value


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    setting: Setting
    deployed: Number | str | None
    planned: Planned
    outcome: Outcome
    where: str  # the resource the deployed value was read from

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.MATCH


def steps_text(
    adjustment_type: str | None,
    steps: list[tuple[float | None, float | None, int]],
    min_adjustment_magnitude: int | None = None,
) -> str:
    """A step policy's adjustments as one comparable line (with its MinAdjustmentMagnitude,
    which sets a small fleet's step)."""

    def bound(value: float | None) -> str:
        return "" if value is None else f"{value:g}"

    at_least = "" if min_adjustment_magnitude is None else f", at least {min_adjustment_magnitude}"
    return (
        f"{adjustment_type} "
        + "; ".join(
            f"{adjustment:+d} on [{bound(low)}, {bound(high)}]" for low, high, adjustment in steps
        )
        + at_least
    )


def schedule_text(actions: Sequence[ScheduledAction | DeployedScheduledAction]) -> str:
    """Scheduled actions as one comparable line, in order of their names (a plan's name its
    steps by time of day)."""

    def one(action: ScheduledAction | DeployedScheduledAction) -> str:
        text = (
            f"{action.schedule} {action.timezone or 'UTC'} min {action.min_capacity} "
            f"max {action.max_capacity}"
        )
        for word, when in (
            ("from", getattr(action, "start_time", None)),
            ("until", getattr(action, "end_time", None)),
        ):
            text += f" {word} {when:%Y-%m-%d %H:%M}" if when else ""
        return text

    return "; ".join(one(a) for a in sorted(actions, key=lambda a: a.name))


def _alarm_values(
    alarm: AlarmSpec, threshold: Setting, statistic: Setting, period: Setting, datapoints: Setting
) -> dict[Setting, Planned]:
    return {
        threshold: alarm.threshold,
        statistic: alarm.statistic,
        period: alarm.period_s,
        datapoints: alarm.datapoints_to_alarm,
    }


def _spec_values(spec: TargetTrackingSpec | StepSpec) -> dict[Setting, Planned]:
    if isinstance(spec, TargetTrackingSpec):
        values: dict[Setting, Planned] = {
            Setting.TARGET_VALUE: spec.target_value,
            Setting.SCALE_OUT_COOLDOWN: spec.scale_out_cooldown_s,
            Setting.TARGET_STATISTIC: spec.high_alarm.statistic,
            Setting.TARGET_PERIOD: spec.high_alarm.period_s,
            Setting.TARGET_METRIC: spec.predefined_metric,
            Setting.TARGET_DATAPOINTS: spec.high_alarm.datapoints_to_alarm,
        }
        if spec.low_alarm is not None:  # its own scale-in: AWS's low alarm and its cooldown
            values |= _alarm_values(spec.low_alarm, *_TRACKING_SCALE_IN_ALARM)
            values[Setting.TRACKING_SCALE_IN_COOLDOWN] = spec.scale_in_cooldown_s or 0
        return values
    steps = [(s.lower, s.upper, s.adjustment) for s in spec.steps]
    if spec.role == "scale-in":
        values = _alarm_values(spec.alarm, *_SCALE_IN_ALARM) | {
            Setting.SCALE_IN_COOLDOWN: spec.cooldown_s,
            Setting.SCALE_IN_STEP: steps_text(spec.adjustment_type, steps),
        }
        if (math := _fleet_math(spec.alarm)) is not None:
            values[Setting.SCALE_IN_EXPRESSION] = metric_math.expression(math, spec.alarm.threshold)
        return values
    return _alarm_values(spec.alarm, *_BURST_ALARM) | {
        Setting.BURST_COOLDOWN: spec.cooldown_s,
        Setting.BURST_STEP: steps_text(spec.adjustment_type, steps, spec.min_adjustment_magnitude),
    }


def _fleet_math(alarm: AlarmSpec) -> metric_math.FleetMath | None:
    math = alarm.after_one_less
    return None if math is None else metric_math.of(math)


_SCALE_IN_ALARM = (
    Setting.SCALE_IN_THRESHOLD, Setting.SCALE_IN_STATISTIC, Setting.SCALE_IN_PERIOD,
    Setting.SCALE_IN_DATAPOINTS,
)  # fmt: skip
_TRACKING_SCALE_IN_ALARM = (
    Setting.TRACKING_SCALE_IN_THRESHOLD, Setting.TRACKING_SCALE_IN_STATISTIC,
    Setting.TRACKING_SCALE_IN_PERIOD, Setting.TRACKING_SCALE_IN_DATAPOINTS,
)  # fmt: skip
_BURST_ALARM = (
    Setting.BURST_THRESHOLD, Setting.BURST_STATISTIC, Setting.BURST_PERIOD,
    Setting.BURST_DATAPOINTS,
)  # fmt: skip


def planned_values(plan: PlanArtifact, bounds: OperatorBounds | None) -> dict[Setting, Planned]:
    """What a deployment of `plan` carries, min/max clamped into `bounds` when given, in
    `Setting` order."""
    low, high = (
        bounds.clamp(plan.min_instances, plan.max_instances)
        if bounds
        else (plan.min_instances, plan.max_instances)
    )
    values: dict[Setting, Planned] = {
        Setting.MIN_INSTANCES: low,
        Setting.MAX_INSTANCES: high,
        **_identity_values(plan),
    }
    if plan.fingerprint is None or plan.fingerprint.model_package is None:
        # A vendor's container reads no bound of ours (the pack skips it too).
        values[Setting.QUEUE_MAX_DEPTH] = plan.queue_max_depth
    for spec in deploy_shape_of(plan).policies:
        values |= _spec_values(spec)
    return {s: values[s] for s in Setting if s in values}


def _identity_values(plan: PlanArtifact) -> dict[Setting, Planned]:
    """What the plan was measured on, as a deployment of it must run it."""
    fingerprint = plan.fingerprint
    if fingerprint is None:
        return {}
    if fingerprint.model_package is not None:
        return {
            Setting.MODEL_PACKAGE: fingerprint.model_package,
            Setting.NETWORK_ISOLATION: ISOLATED,
        }
    return {Setting.IMAGE_DIGEST: fingerprint.image_digest}


def require_feasible(plan: PlanArtifact, source: str) -> None:
    """Refuse an infeasible plan: a stack built from it deploys no autoscaling to compare."""
    if plan.feasible:
        return
    stop = next((f for f in plan.findings if f.verdict.value == "stop"), None)
    why = f" ({stop.name}: {stop.message})" if stop else ""
    raise RefusalError(
        f"{source}: the plan is infeasible{why}; a stack built from it deploys no autoscaling, "
        "so there is nothing to compare; measure again or choose another SLO"
    )


def require_scaling_bounds(bounds: OperatorBounds | None) -> None:
    """Refuse bounds that disable scaling: the stack then deploys no autoscaling to compare."""
    if bounds is not None and not bounds.scaling_enabled:
        raise RefusalError(
            f"--bounds {bounds.min_instances}:{bounds.max_instances} disable scaling (max = min); "
            "the stack deploys no autoscaling to compare; pass the stack's real bounds"
        )


Read = tuple[Number | str | None, str]  # a deployed value and where it was read from


def _alarm_reads(
    alarm: Alarm | None, fallback: str, settings: tuple[Setting, Setting, Setting, Setting]
) -> dict[Setting, Read]:
    where = f"alarm {alarm.name if alarm else fallback}"
    threshold, statistic, period, datapoints = settings
    stat, seconds = (alarm.statistic, alarm.period_s) if alarm else (None, None)
    if alarm is not None and alarm.metrics:
        # Metric math: its queries read Sum over their period, when they are metric_math's.
        parsed = alarm.after_one_less
        stat, seconds = ("Sum", parsed[1]) if parsed else ("metric math", None)
    return {
        threshold: (alarm.threshold if alarm else None, where),
        statistic: (stat, where),
        period: (seconds, where),
        datapoints: (alarm.datapoints if alarm else None, where),
    }


def _expression_read(
    alarm: Alarm | None, spec: AlarmSpec, endpoint: str, variant: str
) -> Read | None:
    """The scale-in alarm's metric math as deployed: its returned expression when its queries
    are the ones `metric_math.queries` writes for the plan's (else with what differs named);
    a plain alarm's metric where the plan has metric math; no row where neither has it."""
    math = _fleet_math(spec)
    if alarm is None:
        return (None, "alarm (none)") if math else None
    where = f"alarm {alarm.name}"
    if not alarm.metrics:
        return (f"{alarm.metric_name} alone", where) if math else None
    text = alarm.returned_expression or "(no one returned expression)"
    wanted = (
        metric_math.queries(math, spec.threshold, endpoint, variant, spec.period_s) if math else []
    )
    if math and metric_math.same(alarm.metrics, wanted):
        return text, where
    parsed = alarm.after_one_less
    if parsed is None:
        return f"{text} (queries not metric_math's)", where
    return f"{text} ({parsed[1]} s, on {metric_math.dimensions_of(alarm.metrics)})", where


def _tracking_reads(
    snapshot: DeployedSnapshot, spec: TargetTrackingSpec, variant: str
) -> dict[Setting, Read]:
    name = policy_name(snapshot.endpoint, variant, spec.role)
    policy = snapshot.policy(name, variant)
    where = f"policy {name}"
    # The alarms Application Auto Scaling made for target tracking say what it evaluates.
    alarms = snapshot.alarms_of(policy) if policy else ()
    high = next((a for a in alarms if "AlarmHigh" in a.name), None)
    low = next((a for a in alarms if "AlarmLow" in a.name), None)
    reads: dict[Setting, Read] = {
        Setting.TARGET_VALUE: (policy.target_value if policy else None, where),
        Setting.SCALE_OUT_COOLDOWN: (policy.scale_out_cooldown_s if policy else None, where),
        Setting.TARGET_METRIC: (policy.predefined_metric if policy else None, where),
    }
    high_where = f"alarm {high.name if high else '(none)'} of policy {name}"
    reads |= {
        Setting.TARGET_STATISTIC: (high.statistic if high else None, high_where),
        Setting.TARGET_PERIOD: (high.period_s if high else None, high_where),
        Setting.TARGET_DATAPOINTS: (high.datapoints if high else None, high_where),
    }
    if spec.low_alarm is not None:
        reads |= _alarm_reads(low, f"(none) of policy {name}", _TRACKING_SCALE_IN_ALARM)
        reads[Setting.TRACKING_SCALE_IN_COOLDOWN] = (
            policy.scale_in_cooldown_s if policy else None,
            where,
        )
    return reads


def _step_reads(snapshot: DeployedSnapshot, spec: StepSpec, variant: str) -> dict[Setting, Read]:
    name = policy_name(snapshot.endpoint, variant, spec.role)
    policy: ScalingPolicy | None = snapshot.policy(name, variant)
    alarm_name = step_alarm_name(snapshot.endpoint, variant, spec.role)
    step_alarms = snapshot.alarms_of(policy) if policy else ()
    # The stack's alarm by name; failing that, whichever alarm drives the step policy.
    alarm = next((a for a in step_alarms if a.name == alarm_name), None) or next(
        iter(step_alarms), None
    )
    where = f"policy {name}"
    burst = spec.role == "burst"
    steps = (
        steps_text(
            policy.adjustment_type,
            list(policy.step_adjustments),
            policy.min_adjustment_magnitude if burst else None,
        )
        if policy and policy.adjustment_type
        else None
    )
    if not burst:
        reads = _alarm_reads(alarm, alarm_name, _SCALE_IN_ALARM) | {
            Setting.SCALE_IN_COOLDOWN: (policy.step_cooldown_s if policy else None, where),
            Setting.SCALE_IN_STEP: (steps, where),
        }
        expression = _expression_read(alarm, spec.alarm, snapshot.endpoint, variant)
        if expression is not None:
            reads[Setting.SCALE_IN_EXPRESSION] = expression
        return reads
    return _alarm_reads(alarm, alarm_name, _BURST_ALARM) | {
        Setting.BURST_COOLDOWN: (policy.step_cooldown_s if policy else None, where),
        Setting.BURST_STEP: (steps, where),
    }


def _identity_reads(deployed: Variant | None) -> dict[Setting, Read]:
    """What the variant's Model runs, each row naming the other kind when it runs that, so a
    mismatch names both (an image where the plan was measured on a package, and the reverse)."""
    model = f"model {deployed.model_name if deployed else '?'}"
    if deployed is None or deployed.model_name is None:
        return {s: (None, model) for s in IDENTITY_SETTINGS}
    package, image = deployed.model_package, deployed.image
    digest = image.partition("@")[2] if image else ""
    as_image = digest or (f"{image} (no digest)" if image else None)
    isolation = ISOLATED if deployed.network_isolation else NOT_ISOLATED
    return {
        Setting.IMAGE_DIGEST: (f"model package {package}" if package else as_image, model),
        Setting.MODEL_PACKAGE: (package or (f"image {as_image}" if as_image else None), model),
        Setting.NETWORK_ISOLATION: (isolation, model),
    }


def _deployed_values(
    snapshot: DeployedSnapshot, plan: PlanArtifact, variant: str
) -> dict[Setting, Read]:
    endpoint = snapshot.endpoint
    target = snapshot.target(variant)
    deployed_variant = snapshot.variant(variant)
    env = deployed_variant.environment if deployed_variant else {}
    target_where = f"scalable target endpoint/{endpoint}/variant/{variant}"
    reads: dict[Setting, Read] = {
        Setting.MIN_INSTANCES: (target.min_capacity if target else None, target_where),
        Setting.MAX_INSTANCES: (target.max_capacity if target else None, target_where),
        Setting.QUEUE_MAX_DEPTH: (
            env.get(ENV_MAX_QUEUE_DEPTH),
            f"model {deployed_variant.model_name if deployed_variant else '?'} env",
        ),
        **_identity_reads(deployed_variant),
    }
    for spec in deploy_shape_of(plan).policies:
        if isinstance(spec, TargetTrackingSpec):
            reads |= _tracking_reads(snapshot, spec, variant)
        else:
            reads |= _step_reads(snapshot, spec, variant)
    return reads


def _equal(deployed: Number | str, planned: Planned) -> bool:
    if isinstance(planned, str):
        return deployed == planned  # a statistic's name
    if isinstance(deployed, str):
        # The container env holds text; "50" equals 50, "50.0" or "" do not.
        return deployed.strip().isdigit() and int(deployed) == planned
    return math.isclose(deployed, planned, rel_tol=1e-9, abs_tol=1e-9)


def _with_schedule(
    planned: dict[Setting, Planned],
    deployed: dict[Setting, Read],
    snapshot: DeployedSnapshot,
    plan: PlanArtifact,
    bounds: OperatorBounds | None,
    variant: str,
) -> dict[Setting, Planned]:
    """`planned` with the schedule's row and the min its schedule holds now; `deployed` with
    the target's scheduled actions."""
    actions = scheduled_actions_of(plan, bounds, snapshot.endpoint, variant)
    on_target = snapshot.scheduled_on(variant)
    if not (actions or on_target):
        return planned
    planned[Setting.SCHEDULE] = schedule_text(actions) if actions else NO_SCHEDULE
    deployed[Setting.SCHEDULE] = (
        schedule_text(on_target) if on_target else None,
        f"scheduled actions on endpoint/{snapshot.endpoint}/variant/{variant}",
    )
    if actions:
        low, high = int(planned[Setting.MIN_INSTANCES]), int(planned[Setting.MAX_INSTANCES])
        planned[Setting.MIN_INSTANCES] = scheduled_min(actions, low, high, snapshot.read_at)
    return {s: planned[s] for s in Setting if s in planned}


def scheduled_min(actions: Sequence[ScheduledAction], low: int, high: int, at: datetime) -> int:
    """The MinCapacity `actions` hold at `at`: the last one due within the week before (a
    weekly schedule's step may have run days ago)."""
    start = (at - 7 * DAY).timestamp()
    return held_at(list(actions), low, high, start, at.timestamp())[0]


def compare_to_plan(
    snapshot: DeployedSnapshot,
    plan: PlanArtifact,
    bounds: OperatorBounds | None = None,
    variant: str = DEFAULT_VARIANT,
    settings: tuple[Setting, ...] = tuple(Setting),
) -> list[Comparison]:
    """One comparison per setting the plan deploys, of those in `settings`, in `Setting` order."""
    deployed = _deployed_values(snapshot, plan, variant)
    planned = _with_schedule(
        planned_values(plan, bounds), deployed, snapshot, plan, bounds, variant
    )
    if Setting.SCALE_IN_EXPRESSION in deployed and Setting.SCALE_IN_EXPRESSION not in planned:
        # A metric-math alarm where the plan's reads one metric differs from its "none".
        planned[Setting.SCALE_IN_EXPRESSION] = NO_EXPRESSION
        planned = {s: planned[s] for s in Setting if s in planned}
    rows = []
    for setting in (s for s in planned if s in settings):
        value, where = deployed[setting]
        if value is None:
            outcome = Outcome.MISSING
        else:
            outcome = Outcome.MATCH if _equal(value, planned[setting]) else Outcome.MISMATCH
        rows.append(
            Comparison(
                setting=setting,
                deployed=value,
                planned=planned[setting],
                outcome=outcome,
                where=where,
            )
        )
    return rows


def read_and_compare(
    session: AwsSession,
    endpoint: str,
    plan: PlanArtifact,
    bounds: OperatorBounds | None = None,
    variant: str = DEFAULT_VARIANT,
) -> list[Comparison]:
    return compare_to_plan(read_snapshot(session, endpoint), plan, bounds, variant)


def format_value(value: Planned | None) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render_table(rows: list[Comparison]) -> str:
    """The side-by-side table `validate` prints."""
    header = ("setting", "deployed", "plan", "verdict")
    body = [
        (r.setting.value, format_value(r.deployed), format_value(r.planned), r.outcome.value)
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    )
