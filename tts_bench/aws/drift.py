"""`drift`: reconcile what is deployed against the endpoint, the plan and the stack's bounds.

`check_drift` is pure rules over a `DeployedSnapshot`; `read_and_check` is the thin edge that
reads the snapshot with boto3 (read-only). Errors: orphaned scalable targets or policies,
scaling left suspended, a scaling alarm stuck in INSUFFICIENT_DATA, and (with a plan) a
Model that runs another image digest or model package than the plan was measured on (or a
package without network isolation), and a scaling setting that differs from the plan, its
scheduled actions and the min instances its schedule holds now included. Warning: desired capacity outside min/max.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Final

from pydantic import BaseModel, ConfigDict

from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.aws.deployed import DeployedSnapshot, ScalingPolicy, read_snapshot
from tts_bench.aws.session import AwsSession
from tts_bench.aws.validate import (
    IDENTITY_SETTINGS,
    SCALING_SETTINGS,
    Outcome,
    Setting,
    compare_to_plan,
    format_value,
)
from tts_bench.deployment import (
    DEFAULT_VARIANT,
    POLICY_ROLES,
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    OperatorBounds,
    parse_resource_id,
    policy_name,
    resource_id,
)
from tts_bench.planning.deploy import deploy_shape_of

# A fresh alarm sits in INSUFFICIENT_DATA until its first evaluation; past this it is "stuck".
DEFAULT_INSUFFICIENT_DATA_GRACE_S: Final = 900.0


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Rule(StrEnum):
    ORPHAN_TARGET = "orphan-target"
    ORPHAN_POLICY = "orphan-policy"
    SCALING_SUSPENDED = "scaling-suspended"
    ALARM_INSUFFICIENT_DATA = "alarm-insufficient-data"
    PLAN_MISMATCH = "plan-mismatch"
    IMAGE_MISMATCH = "image-mismatch"
    PACKAGE_MISMATCH = "package-mismatch"
    CAPACITY_OUTSIDE_BOUNDS = "capacity-outside-bounds"


class DriftFinding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: Rule
    severity: Severity
    resource: str
    message: str


class DriftReport(BaseModel):
    """What `drift --json` prints."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str
    variant: str
    region: str
    plan_id: str | None
    read_at: datetime
    clean: bool
    findings: list[DriftFinding]

    @property
    def errors(self) -> list[DriftFinding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[DriftFinding]:
        return [f for f in self.findings if f.severity is Severity.WARNING]


def _deregister_hint(rid: str) -> str:
    return (
        f"aws application-autoscaling deregister-scalable-target --service-namespace "
        f"{SERVICE_NAMESPACE} --resource-id {rid} --scalable-dimension {SCALABLE_DIMENSION}"
    )


def _unaccounted(
    snapshot: DeployedSnapshot, variant: str, rid: str, scaling_expected: bool
) -> str | None:
    """Why nothing accounts for a variant's scaling resource; None when something does."""
    parsed = parse_resource_id(rid)
    if parsed is None:
        return None  # not an endpoint variant (e.g. an inference component): not ours to judge
    endpoint, its_variant = parsed
    if endpoint == snapshot.endpoint:
        if its_variant != variant:
            return f"the stack scales variant {variant!r} of {endpoint!r}, not {its_variant!r}"
        if snapshot.variant(its_variant) is None:
            return f"endpoint {endpoint!r} has no variant {its_variant!r}"
        if not scaling_expected:
            return "the stack's bounds disable scaling (max = min)"
        return None
    known = snapshot.other_endpoints.get(endpoint)
    if known is None:
        return f"endpoint {endpoint!r} does not exist"
    if its_variant not in known:
        return f"endpoint {endpoint!r} has no variant {its_variant!r}"
    return None


def _orphans(
    snapshot: DeployedSnapshot,
    variant: str,
    scaling_expected: bool,
    plan: PlanArtifact | None = None,
) -> list[DriftFinding]:
    findings = []
    registered = {t.resource_id for t in snapshot.targets}
    for target in snapshot.targets:
        why = _unaccounted(snapshot, variant, target.resource_id, scaling_expected)
        if why:
            findings.append(
                DriftFinding(
                    rule=Rule.ORPHAN_TARGET,
                    severity=Severity.ERROR,
                    resource=f"scalable target {target.resource_id}",
                    message=f"orphaned scalable target: {why}; remove it from the stack that made "
                    f"it, or `{_deregister_hint(target.resource_id)}`",
                )
            )
    # The policies the stack makes: the plan's deploy shape, or any role a plan may deploy.
    roles = [p.role for p in deploy_shape_of(plan).policies] if plan else list(POLICY_ROLES)
    expected_names = {policy_name(snapshot.endpoint, variant, role) for role in roles}
    own = resource_id(snapshot.endpoint, variant)
    for policy in snapshot.policies:
        why = _unaccounted(snapshot, variant, policy.resource_id, scaling_expected)
        if why is None and policy.resource_id not in registered:
            why = "no scalable target is registered for its variant"
        if why is None and policy.resource_id == own and policy.name not in expected_names:
            why = f"the stack makes only {', '.join(sorted(expected_names))}"
        if why:
            findings.append(_orphan_policy(policy, why))
    return findings


def _orphan_policy(policy: ScalingPolicy, why: str) -> DriftFinding:
    return DriftFinding(
        rule=Rule.ORPHAN_POLICY,
        severity=Severity.ERROR,
        resource=f"policy {policy.name} on {policy.resource_id}",
        message=f"orphaned scaling policy: {why}; remove it from the stack that made it, or "
        f"`aws application-autoscaling delete-scaling-policy --policy-name {policy.name} "
        f"--service-namespace {SERVICE_NAMESPACE} --resource-id {policy.resource_id} "
        f"--scalable-dimension {SCALABLE_DIMENSION}`",
    )


def _suspension(snapshot: DeployedSnapshot, variant: str) -> list[DriftFinding]:
    target = snapshot.target(variant)
    if target is None or not target.suspended.any:
        return []
    return [
        DriftFinding(
            rule=Rule.SCALING_SUSPENDED,
            severity=Severity.ERROR,
            resource=f"scalable target {target.resource_id}",
            message=f"scaling left suspended ({target.suspended.describe()}), probably by an "
            f"interrupted run; run `tts-bench thaw --endpoint {snapshot.endpoint}`",
        )
    ]


def _alarms(snapshot: DeployedSnapshot, variant: str, grace_s: float) -> list[DriftFinding]:
    findings = []
    seen: set[str] = set()
    for policy in snapshot.policies_on(variant):
        for alarm in snapshot.alarms_of(policy):
            if alarm.state != "INSUFFICIENT_DATA" or alarm.name in seen:
                continue
            seen.add(alarm.name)
            held_s = (
                (snapshot.read_at - alarm.state_updated_at).total_seconds()
                if alarm.state_updated_at
                else None
            )
            stuck = held_s is None or held_s >= grace_s
            since = "" if held_s is None else f" for {held_s:.0f} s"
            findings.append(
                DriftFinding(
                    rule=Rule.ALARM_INSUFFICIENT_DATA,
                    severity=Severity.ERROR if stuck else Severity.WARNING,
                    resource=f"alarm {alarm.name} of policy {policy.name}",
                    message=(
                        f"alarm in INSUFFICIENT_DATA{since}: nothing publishes "
                        f"{alarm.reads or 'its metric'}, so the policy never acts; check "
                        "its metric's name, namespace and dimensions against what is published"
                        if stuck
                        else f"alarm in INSUFFICIENT_DATA{since}, younger than the "
                        f"{grace_s:.0f} s grace; re-run drift once it has been evaluated"
                    ),
                )
            )
    return findings


def _plan_mismatches(
    snapshot: DeployedSnapshot, plan: PlanArtifact, bounds: OperatorBounds | None, variant: str
) -> list[DriftFinding]:
    clamped = " (clamped into --bounds)" if bounds else ""
    instances = (Setting.MIN_INSTANCES, Setting.MAX_INSTANCES, Setting.SCHEDULE)
    now = f", its schedule's step at {snapshot.read_at:%H:%M} UTC," if plan.schedule else ""
    return [
        DriftFinding(
            rule=Rule.PLAN_MISMATCH,
            severity=Severity.ERROR,
            resource=row.where,
            message=f"{row.setting.value}: deployed {format_value(row.deployed)}, plan "
            f"{plan.plan_id}{clamped if row.setting in instances else ''}"
            f"{now if row.setting is Setting.MIN_INSTANCES else ''} says "
            f"{format_value(row.planned)}; deploy the plan (`pulumi up`) or pass the plan it "
            "was deployed from",
        )
        for row in compare_to_plan(snapshot, plan, bounds, variant, SCALING_SETTINGS)
        if row.outcome is not Outcome.MATCH
    ]


def _identity_mismatches(
    snapshot: DeployedSnapshot, plan: PlanArtifact, variant: str
) -> list[DriftFinding]:
    """The Model runs another image or package than the plan was measured on, or runs a
    package without network isolation: the plan's numbers are not this container's."""
    findings = []
    for row in compare_to_plan(snapshot, plan, None, variant, IDENTITY_SETTINGS):
        if row.ok:
            continue
        if row.setting is Setting.NETWORK_ISOLATION:
            why = "a model package runs only network-isolated; deploy the stack's Model"
        else:
            why = (
                f"plan {plan.plan_id} was measured on {format_value(row.planned)}; deploy what "
                "the plan was measured on, or measure what is deployed and plan again"
            )
        findings.append(
            DriftFinding(
                rule=Rule.IMAGE_MISMATCH
                if row.setting is Setting.IMAGE_DIGEST
                else Rule.PACKAGE_MISMATCH,
                severity=Severity.ERROR,
                resource=row.where,
                message=f"{row.setting.value}: deployed {format_value(row.deployed)}; {why}",
            )
        )
    return findings


def _capacity(snapshot: DeployedSnapshot, variant: str) -> list[DriftFinding]:
    target = snapshot.target(variant)
    live = snapshot.variant(variant)
    if target is None or live is None or live.desired_instance_count is None:
        return []
    desired = live.desired_instance_count
    if target.min_capacity <= desired <= target.max_capacity:
        return []
    return [
        DriftFinding(
            rule=Rule.CAPACITY_OUTSIDE_BOUNDS,
            severity=Severity.WARNING,
            resource=f"variant {variant} of endpoint {snapshot.endpoint}",
            message=f"desired capacity {desired} is outside min/max "
            f"{target.min_capacity}/{target.max_capacity}; Application Auto Scaling will move it "
            "back on its next action",
        )
    ]


def check_drift(
    snapshot: DeployedSnapshot,
    *,
    variant: str = DEFAULT_VARIANT,
    plan: PlanArtifact | None = None,
    bounds: OperatorBounds | None = None,
    insufficient_data_grace_s: float = DEFAULT_INSUFFICIENT_DATA_GRACE_S,
) -> DriftReport:
    """Every drift finding, errors first; `clean` when there is no error."""
    scaling_expected = bounds is None or bounds.scaling_enabled
    findings = [
        *_orphans(snapshot, variant, scaling_expected, plan),
        *_suspension(snapshot, variant),
        *_alarms(snapshot, variant, insufficient_data_grace_s),
        *(
            [
                *_identity_mismatches(snapshot, plan, variant),
                *_plan_mismatches(snapshot, plan, bounds, variant),
            ]
            if plan is not None and scaling_expected
            else []
        ),
        *_capacity(snapshot, variant),
    ]
    findings.sort(key=lambda f: f.severity is not Severity.ERROR)
    return DriftReport(
        endpoint=snapshot.endpoint,
        variant=variant,
        region=snapshot.region,
        plan_id=plan.plan_id if plan else None,
        read_at=snapshot.read_at,
        clean=not any(f.severity is Severity.ERROR for f in findings),
        findings=findings,
    )


def read_and_check(
    session: AwsSession,
    endpoint: str,
    *,
    variant: str = DEFAULT_VARIANT,
    plan: PlanArtifact | None = None,
    bounds: OperatorBounds | None = None,
    insufficient_data_grace_s: float = DEFAULT_INSUFFICIENT_DATA_GRACE_S,
) -> DriftReport:
    return check_drift(
        read_snapshot(session, endpoint),
        variant=variant,
        plan=plan,
        bounds=bounds,
        insufficient_data_grace_s=insufficient_data_grace_s,
    )
