"""The endpoint a rehearsal drives: its build, its deployed scaling and its clock, read back.

Everything here is read before a request is sent, and every reason not to rehearse is one line:
an endpoint that is not InService or not settled, of another build than the plan, with no
scaling deployed (no scalable target, no policy: no plan was deployed), with scaling frozen
(a suspended direction, or min = max), or whose deployed settings are not the plan's (what
`tts-bench validate` compares, the operator's min/max apart). The clock is the service's
(`ServiceClock.from_environment`): a compressed local cloud's, or the wall clock on AWS, where a
time scale other than 1 is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.schema import AlarmSpec, PlanArtifact, StepSpec, TargetTrackingSpec
from tts_bench.aws.clock import ServiceClock
from tts_bench.aws.deployed import Alarm, DeployedSnapshot, ScalingPolicy, read_snapshot
from tts_bench.aws.session import AwsSession
from tts_bench.aws.validate import SCALING_SETTINGS, Setting, compare_to_plan, format_value
from tts_bench.errors import RefusalError
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target
from tts_bench.planning import aws_scaling
from tts_bench.planning.deploy import alarm_rule, deploy_shape_of

# Compared with the plan before anything is sent; min and max are the operator's clamp of the
# plan's (the stack's bounds), read back and replayed as deployed.
COMPARED = tuple(
    s
    for s in (*SCALING_SETTINGS, Setting.QUEUE_MAX_DEPTH)
    if s not in (Setting.MIN_INSTANCES, Setting.MAX_INSTANCES)
)


@dataclass(frozen=True)
class DeployedAlarm:
    """One alarm of the deployed policies: which policy (by its plan role) it drives and the
    rule it evaluates, under the name AWS gave it."""

    role: str
    kind: str  # "high", "low" (target tracking's) or "step"
    rule: aws_scaling.AlarmRule

    @property
    def scales_out(self) -> bool:
        return self.kind == "high" or (
            self.kind == "step" and self.rule.comparison.startswith("Greater")
        )


@dataclass(frozen=True)
class RehearsalTarget:
    """The endpoint as a rehearsal sees it, read once before it starts."""

    target: EndpointTarget
    clock: ServiceClock
    min_instances: int
    max_instances: int
    alarms: tuple[DeployedAlarm, ...]
    desired: int
    in_service: int

    @property
    def rate_scale(self) -> float:
        return self.target.rate_scale

    @property
    def thinning(self) -> float:
        """How many of the modelled fleet's requests one request sent here stands for."""
        return self.target.rate_scale * self.clock.scale

    def alarm(self, name: str) -> DeployedAlarm | None:
        return next((a for a in self.alarms if a.rule.name == name), None)


def check_clock(clock: ServiceClock, time_scale: float | None, emulated: bool) -> None:
    if time_scale is not None and time_scale != clock.scale:
        raise RefusalError(
            f"--time-scale {time_scale:g}: the endpoint's clock runs at {clock.scale:g} (the local "
            "cloud's env file sets TTS_BENCH_TIME_SCALE); drop the flag or start the cloud with it"
        )
    if not emulated and clock.scale != 1.0:
        raise RefusalError(
            f"the time scale is {clock.scale:g} but endpoint runs on AWS, whose clocks run at 1: "
            "unset TTS_BENCH_TIME_SCALE and TTS_BENCH_TIME_ORIGIN"
        )


def _roles(plan: PlanArtifact) -> dict[str, TargetTrackingSpec | StepSpec]:
    return {p.role: p for p in deploy_shape_of(plan).policies}


def _role_of(policy: ScalingPolicy, plan: PlanArtifact) -> str:
    """The plan role a deployed policy plays: its target tracking, or the step whose alarm
    compares the same way (a plan deploys at most one step of each direction)."""
    for role, spec in _roles(plan).items():
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
    snapshot: DeployedSnapshot,
    policy: ScalingPolicy,
    role: str,
    spec: TargetTrackingSpec | StepSpec,
) -> list[DeployedAlarm]:
    found: list[DeployedAlarm] = []
    for alarm in snapshot.alarms_of(policy):
        if isinstance(spec, TargetTrackingSpec):
            high = not (alarm.comparison or "").startswith("Less")
            kind, planned = ("high", spec.high_alarm) if high else ("low", spec.low_alarm)
            if planned is None:
                continue
        else:
            kind, planned = "step", spec.alarm
        found.append(DeployedAlarm(role, kind, _rule(alarm, planned)))
    return found


def _rule(alarm: Alarm, planned: AlarmSpec) -> aws_scaling.AlarmRule:
    """The deployed alarm as a rule: its name, the plan's settings (compared equal before)."""
    return alarm_rule(alarm.name, planned)


def read_rehearsal_target(
    session: AwsSession,
    endpoint: str,
    variant: str,
    plan: PlanArtifact,
    model: str,
    time_scale: float | None,
) -> RehearsalTarget:
    """Read and check the endpoint; refuse, in one line, anything that makes it no rehearsal."""
    target = read_endpoint_target(session, endpoint, variant, Transport.RESPONSE_STREAM, model)
    clock = ServiceClock.from_environment()
    check_clock(clock, time_scale, target.emulated)
    target.refuse_not_in_service()
    if plan.fingerprint is not None and (diffs := plan.fingerprint.differences(target.fingerprint)):
        raise RefusalError(
            f"endpoint {endpoint} serves another build than plan {plan.plan_id} was made for "
            f"({'; '.join(diffs)}); rehearse the plan of the build deployed"
        )
    snapshot = read_snapshot(session, endpoint)
    scalable = snapshot.target(variant)
    policies = snapshot.policies_on(variant)
    if scalable is None or not policies:
        missing = "no scalable target" if scalable is None else "no scaling policy"
        raise RefusalError(
            f"endpoint {endpoint} has no deployed plan ({missing} on variant {variant}): deploy "
            f"plan {plan.plan_id} first (its file in the stack's measurementsDir, then pulumi up)"
        )
    if scalable.suspended.any:
        raise RefusalError(
            f"endpoint {endpoint}'s scaling is frozen ({scalable.suspended.describe()} suspended): "
            f"a rehearsal needs it live; run tts-bench thaw --endpoint {endpoint}"
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
    roles = _roles(plan)
    alarms: list[DeployedAlarm] = []
    for policy in policies:
        role = _role_of(policy, plan)
        alarms += _alarms_of(snapshot, policy, role, roles[role])
    live = snapshot.variant(variant)
    desired = (live.desired_instance_count if live else None) or 0
    in_service = (live.current_instance_count if live else None) or 0
    if snapshot.endpoint_status != "InService" or desired != in_service:
        raise RefusalError(
            f"endpoint {endpoint} is not settled ({snapshot.endpoint_status}, desired {desired}, "
            f"{in_service} in service): wait until it is, so both runs start from one fleet"
        )
    return RehearsalTarget(
        target,
        clock,
        scalable.min_capacity,
        scalable.max_capacity,
        tuple(alarms),
        desired,
        in_service,
    )
