"""`validate`: the deployed scaling settings against a plan's, side by side with a verdict each.

`compare_to_plan` is pure: a `DeployedSnapshot` and a `PlanArtifact` (its min/max clamped into
the operator's bounds when given, as the stack deploys them) in, one `Comparison` per setting
out. `drift --plan` reuses it for the scaling settings. `read_and_compare` is the thin edge
that reads the snapshot with boto3.
"""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from tts_bench.artifacts.schema import PlanArtifact
from tts_bench.aws.deployed import DeployedSnapshot, read_snapshot
from tts_bench.aws.session import AwsSession
from tts_bench.deployment import (
    DEFAULT_VARIANT,
    OperatorBounds,
    scale_in_alarm_name,
    scale_in_policy_name,
    target_tracking_policy_name,
)
from tts_bench.errors import RefusalError
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH

Number = int | float
Planned = Number | str


class Setting(StrEnum):
    """The deployed settings a plan decides, in the order they are reported."""

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
    QUEUE_MAX_DEPTH = ENV_MAX_QUEUE_DEPTH


SCALING_SETTINGS = tuple(s for s in Setting if s is not Setting.QUEUE_MAX_DEPTH)


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


def planned_values(plan: PlanArtifact, bounds: OperatorBounds | None) -> dict[Setting, Planned]:
    """What a deployment of `plan` carries, min/max clamped into `bounds` when given."""
    low, high = (
        bounds.clamp(plan.min_instances, plan.max_instances)
        if bounds
        else (plan.min_instances, plan.max_instances)
    )
    return {
        Setting.TARGET_VALUE: plan.scaling_target_value,
        Setting.SCALE_IN_THRESHOLD: plan.scale_in_threshold,
        Setting.SCALE_OUT_COOLDOWN: plan.scale_out_cooldown_s,
        Setting.SCALE_IN_COOLDOWN: plan.scale_in_cooldown_s,
        Setting.MIN_INSTANCES: low,
        Setting.MAX_INSTANCES: high,
        Setting.TARGET_STATISTIC: plan.target_units.statistic,
        Setting.TARGET_PERIOD: plan.target_units.period_s,
        Setting.SCALE_IN_STATISTIC: plan.scale_in_units.statistic,
        Setting.SCALE_IN_PERIOD: plan.scale_in_units.period_s,
        Setting.QUEUE_MAX_DEPTH: plan.queue_max_depth,
    }


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


def _deployed_values(
    snapshot: DeployedSnapshot, variant: str
) -> dict[Setting, tuple[Number | str | None, str]]:
    endpoint = snapshot.endpoint
    target = snapshot.target(variant)
    tracking = snapshot.policy(target_tracking_policy_name(endpoint, variant), variant)
    step = snapshot.policy(scale_in_policy_name(endpoint, variant), variant)
    alarm_name = scale_in_alarm_name(endpoint, variant)
    step_alarms = snapshot.alarms_of(step) if step else ()
    # The stack's alarm by name; failing that, whichever alarm drives the step policy.
    alarm = next((a for a in step_alarms if a.name == alarm_name), None) or next(
        iter(step_alarms), None
    )
    # The alarms Application Auto Scaling made for target tracking say what it evaluates.
    tracking_alarm = next(iter(snapshot.alarms_of(tracking)), None) if tracking else None
    tracking_where = f"alarm {tracking_alarm.name if tracking_alarm else '(none)'} of policy " + (
        target_tracking_policy_name(endpoint, variant)
    )
    deployed_variant = snapshot.variant(variant)
    env = deployed_variant.environment if deployed_variant else {}
    target_where = f"scalable target endpoint/{endpoint}/variant/{variant}"
    return {
        Setting.TARGET_VALUE: (
            tracking.target_value if tracking else None,
            f"policy {target_tracking_policy_name(endpoint, variant)}",
        ),
        Setting.SCALE_IN_THRESHOLD: (
            alarm.threshold if alarm else None,
            f"alarm {alarm.name if alarm else alarm_name}",
        ),
        Setting.SCALE_OUT_COOLDOWN: (
            tracking.scale_out_cooldown_s if tracking else None,
            f"policy {target_tracking_policy_name(endpoint, variant)}",
        ),
        Setting.SCALE_IN_COOLDOWN: (
            step.step_cooldown_s if step else None,
            f"policy {scale_in_policy_name(endpoint, variant)}",
        ),
        Setting.MIN_INSTANCES: (target.min_capacity if target else None, target_where),
        Setting.MAX_INSTANCES: (target.max_capacity if target else None, target_where),
        Setting.TARGET_STATISTIC: (
            tracking_alarm.statistic if tracking_alarm else None,
            tracking_where,
        ),
        Setting.TARGET_PERIOD: (
            tracking_alarm.period_s if tracking_alarm else None,
            tracking_where,
        ),
        Setting.SCALE_IN_STATISTIC: (
            alarm.statistic if alarm else None,
            f"alarm {alarm.name if alarm else alarm_name}",
        ),
        Setting.SCALE_IN_PERIOD: (
            alarm.period_s if alarm else None,
            f"alarm {alarm.name if alarm else alarm_name}",
        ),
        Setting.QUEUE_MAX_DEPTH: (
            env.get(ENV_MAX_QUEUE_DEPTH),
            f"model {deployed_variant.model_name if deployed_variant else '?'} env",
        ),
    }


def _equal(deployed: Number | str, planned: Planned) -> bool:
    if isinstance(planned, str):
        return deployed == planned  # a statistic's name
    if isinstance(deployed, str):
        # The container env holds text; "50" equals 50, "50.0" or "" do not.
        return deployed.strip().isdigit() and int(deployed) == planned
    return math.isclose(deployed, planned, rel_tol=1e-9, abs_tol=1e-9)


def compare_to_plan(
    snapshot: DeployedSnapshot,
    plan: PlanArtifact,
    bounds: OperatorBounds | None = None,
    variant: str = DEFAULT_VARIANT,
    settings: tuple[Setting, ...] = tuple(Setting),
) -> list[Comparison]:
    """One comparison per setting, in `settings` order."""
    planned = planned_values(plan, bounds)
    deployed = _deployed_values(snapshot, variant)
    rows = []
    for setting in settings:
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
