"""A variant's deployed scaling, read back live and checked against the plan it should run.

What a rehearsal and an organic T_total need before they send a request: the deployed policies
by their plan role, their alarms (as rules, under the names AWS gave them), the bounds and the
fleet now, and a one-line refusal for anything that makes the policy not the plan's, or not
live: no scalable target or no policy (no plan deployed), a suspended direction or min = max
(scaling frozen), a deployed setting other than the plan's (what `validate` compares, the
operator's min/max apart), an endpoint that has not settled.
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_bench.artifacts.plan import AlarmSpec, PlanArtifact, StepSpec, TargetTrackingSpec
from tts_bench.aws.deployed import DeployedSnapshot, ScalingPolicy, read_snapshot
from tts_bench.aws.session import AwsSession
from tts_bench.aws.validate import SCALING_SETTINGS, Setting, compare_to_plan, format_value
from tts_bench.errors import RefusalError
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.deploy import alarm_rule, deploy_shape_of

# Compared with the plan; min and max are the operator's clamp of the plan's (the stack's
# bounds), read back and used as deployed, and so are the scheduled actions' capacities.
COMPARED = tuple(
    s
    for s in (*SCALING_SETTINGS, Setting.QUEUE_MAX_DEPTH)
    if s not in (Setting.MIN_INSTANCES, Setting.MAX_INSTANCES, Setting.SCHEDULE)
)


@dataclass(frozen=True)
class DeployedAlarm:
    """One alarm of the deployed policies: the plan role of the policy it drives, which alarm of
    it (`high` and `low`: target tracking's own; `step`), and the rule it evaluates."""

    role: str
    kind: str
    rule: aws_scaling.AlarmRule

    @property
    def scales_out(self) -> bool:
        if self.kind == "step":
            return self.rule.comparison.startswith("Greater")
        return self.kind == "high"


@dataclass(frozen=True)
class LiveScaling:
    """The variant's scaling as deployed, checked against the plan, and its fleet now."""

    min_instances: int
    max_instances: int
    alarms: tuple[DeployedAlarm, ...]
    desired: int
    in_service: int

    def alarm(self, name: str) -> DeployedAlarm | None:
        return next((a for a in self.alarms if a.rule.name == name), None)

    def alarm_named_in(self, cause: str) -> DeployedAlarm | None:
        """The alarm a scaling activity's cause names ("monitor alarm A in state ALARM …")."""
        return next((a for a in self.alarms if f"alarm {a.rule.name} " in cause), None)


def _role_of(policy: ScalingPolicy, plan: PlanArtifact) -> str:
    """The plan role a deployed policy plays: its target tracking, or the step whose alarm
    compares the same way (a plan deploys at most one step of each direction)."""
    for role, spec in ((p.role, p) for p in deploy_shape_of(plan).policies):
        if policy.policy_type == "TargetTrackingScaling" and isinstance(spec, TargetTrackingSpec):
            return role
        if policy.policy_type == "StepScaling" and isinstance(spec, StepSpec):
            greater = spec.alarm.comparison.startswith("Greater")
            if greater == any(step[2] > 0 for step in policy.step_adjustments):
                return role
    raise RefusalError(
        f"deployed policy {policy.name} ({policy.policy_type}) is none of plan {plan.plan_id}'s; "
        "run tts-bench validate --plan P to see what is deployed"
    )


def _alarms_of(
    snapshot: DeployedSnapshot, policy: ScalingPolicy, role: str, plan: PlanArtifact
) -> list[DeployedAlarm]:
    """The policy's alarms as rules: each under its deployed name, with the plan's settings
    (compared equal before)."""
    spec = next(p for p in deploy_shape_of(plan).policies if p.role == role)
    found: list[DeployedAlarm] = []
    for alarm in snapshot.alarms_of(policy):
        planned: AlarmSpec | None
        if isinstance(spec, TargetTrackingSpec):
            high = not (alarm.comparison or "").startswith("Less")
            kind, planned = ("high", spec.high_alarm) if high else ("low", spec.low_alarm)
        else:
            kind, planned = "step", spec.alarm
        if planned is not None:
            found.append(DeployedAlarm(role, kind, alarm_rule(alarm.name, planned)))
    return found


def check_live(
    snapshot: DeployedSnapshot, variant: str, plan: PlanArtifact, scale_in_may_rest: bool = False
) -> None:
    """Refuse a variant whose scaling is not the plan's, or not live (`scale_in_may_rest`: its
    dynamic scale-in alone may be suspended, for a measurement of a scale-out)."""
    endpoint = snapshot.endpoint
    scalable = snapshot.target(variant)
    if scalable is None or not snapshot.policies_on(variant):
        missing = "no scalable target" if scalable is None else "no scaling policy"
        raise RefusalError(
            f"endpoint {endpoint} has no deployed plan ({missing} on variant {variant}): deploy "
            f"plan {plan.plan_id} first (its file in the stack's measurementsDir, then pulumi up)"
        )
    resting = scalable.suspended.dynamic_in and scale_in_may_rest
    if scalable.suspended.any and not (resting and not scalable.suspended.dynamic_out):
        raise RefusalError(
            f"endpoint {endpoint}'s scaling is frozen ({scalable.suspended.describe()} suspended): "
            f"this needs it live; run tts-bench thaw --endpoint {endpoint}"
        )
    if scalable.min_capacity >= scalable.max_capacity:
        raise RefusalError(
            f"endpoint {endpoint}'s scaling is frozen (min = max = {scalable.min_capacity}): "
            f"nothing can scale; run tts-bench thaw --endpoint {endpoint} or raise the stack's "
            "maxInstances"
        )
    differ = [c for c in compare_to_plan(snapshot, plan, None, variant, COMPARED) if not c.ok]
    if differ:
        first = differ[0]
        raise RefusalError(
            f"endpoint {endpoint} does not run plan {plan.plan_id}: {len(differ)} setting(s) "
            f"differ, first {first.setting.value} deployed {format_value(first.deployed)} against "
            f"{format_value(first.planned)}; run tts-bench validate --plan P --endpoint {endpoint}"
        )


def read_live_scaling(
    session: AwsSession,
    endpoint: str,
    variant: str,
    plan: PlanArtifact,
    scale_in_may_rest: bool = False,
) -> LiveScaling:
    """Read the variant's deployed scaling; refuse, in one line, unless it is the plan's, live
    and settled (so a run starts from one known fleet)."""
    snapshot = read_snapshot(session, endpoint)
    check_live(snapshot, variant, plan, scale_in_may_rest)
    scalable = snapshot.target(variant)
    assert scalable is not None  # check_live
    alarms: list[DeployedAlarm] = []
    for policy in snapshot.policies_on(variant):
        alarms += _alarms_of(snapshot, policy, _role_of(policy, plan), plan)
    live = snapshot.variant(variant)
    desired = (live.desired_instance_count if live else None) or 0
    in_service = (live.current_instance_count if live else None) or 0
    if snapshot.endpoint_status != "InService" or desired != in_service:
        raise RefusalError(
            f"endpoint {endpoint} is not settled ({snapshot.endpoint_status}, desired {desired}, "
            f"{in_service} in service): wait until it is, so the run starts from one fleet"
        )
    return LiveScaling(
        scalable.min_capacity, scalable.max_capacity, tuple(alarms), desired, in_service
    )
