"""T_total organic: the deployed policy scales out on the probe's own load (SPEC §13).

Where force-desired T_total bypasses the policy, this one lets it act, and so measures what the
seed only bounds, the policy's detection lag, stage by stage from each stage's own source:

- `load_crossed` (the probe's own clock): open-loop arrivals (the surge's sender: a closed loop
  cannot hold a rate past a level) run at half the plan's scale-out level for a warm-up, then step to `load_factor` × the level at the start of a period of the
  target-tracking alarm's metric. On a rate metric (InvocationsPerInstance) the crossing is the
  step; on a concurrency metric it is the moment the probe's own requests in flight per
  instance first exceed the target (in client units: target ÷ the plan's CloudWatch ratio);
- `first_datapoint_over` (CloudWatch GetMetricData): the end of the first period whose datapoint
  of the acting alarm's metric breaches its threshold;
- `alarm` (DescribeAlarmHistory): the acting alarm's change to ALARM;
- `scaling_activity` (DescribeScalingActivities): the first scale-out, whose cause names the
  acting alarm and so the policy;
- `desired_set` (DescribeEndpoint, polled): the variant's desired count raised;
- then force-desired's stages (`sagemaker`): the new instance's log stream and container
  markers, InService with the new count, and the probe recovered within the ladder-based bound.

The detection stages are recorded, not counted: `measured_total_s` runs from `desired_set` as
force-desired's does, and the lag (load_crossed → desired_set) is the artifact's `detection`,
with the deploy shape it was measured under (`plan` uses it only for a shape of that structure).
Nothing is frozen: the endpoint is left as its policy leaves it. On a compressed local cloud of
curve instances every time is the cloud's (`ServiceClock`), the probe's rate is the fleet's ÷
(S × K), and its TTFAB bound × S (a curve instance serves S times slower).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.plan import PlanArtifact, TargetTrackingSpec
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.ttotal import Detection, Trigger, TtotalArtifact
from tts_bench.aws.clock import ServiceClock, service_clock
from tts_bench.aws.live_scaling import DeployedAlarm, LiveScaling, read_live_scaling
from tts_bench.aws.scaling_record import (
    Watched,
    read_activities,
    read_datapoints,
    read_transitions,
)
from tts_bench.aws.session import AwsSession
from tts_bench.deployment import DEFAULT_POLICY_LAG_BOUND_S
from tts_bench.errors import RefusalError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.open_loop import EpochClock, OpenLoopSender, StreamEndpoint
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target
from tts_bench.measure.samples import Sample
from tts_bench.measure.transport.contract import KOKORO, EndpointContract
from tts_bench.measure.transport.response_stream import runtime_client
from tts_bench.measure.transport.stream_events import Outcome
from tts_bench.measure.ttotal.aws import instance_streams, stream_markers
from tts_bench.measure.ttotal.probe import ProbeSample, TtotalError
from tts_bench.measure.ttotal.quota import read_quota_check
from tts_bench.measure.ttotal.recovery import recovery_rule, recovery_time
from tts_bench.measure.ttotal.sagemaker import (
    CONTAINER_MARKERS,
    DEFAULT_BOUND_RUNG,
    DEFAULT_RECOVERY_FACTOR,
    DEFAULT_RECOVERY_HOLD_S,
    EMULATED_PROVISIONING,
    ENDPOINT_SKEW_S,
    check_pairing,
    recovery_bound_ms,
    sagemaker_qmax,
)
from tts_bench.measure.ttotal.stages import measured_total_s, recorded_events, stages_from_events
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.deploy import deploy_shape_of, detection_shape
from tts_bench.telemetry import SAGEMAKER_INVOCATIONS_PER_INSTANCE

DEFAULT_LOAD_FACTOR: Final = 1.1
WARMUP_FACTOR: Final = 0.5  # the warm-up's load, a share of the scale-out level
DEFAULT_WARMUP_S: Final = 60.0  # of the service's clock
DEFAULT_TIMEOUT_S: Final = 1800.0  # of the service's clock, from load_crossed
PROBE_THREADS: Final = 256
POLL_SERVICE_S: Final = 2.0
MIN_POLL_WALL_S: Final = 0.05
ROLLING_WINDOW_S: Final = 10.0
CURVE_STAGES: Final = (
    "curve instances: the stages of the ttotal artifact they were started with, replayed on the "
    "cloud's clock"
)
DETECTION: Final = ("load_crossed", "first_datapoint_over", "alarm", "scaling_activity")


@dataclass(frozen=True, slots=True)
class OrganicTtotalRequest:
    qmax_path: Path
    plan_path: Path
    endpoint: str
    variant: str
    model: str
    utterances: Sequence[Utterance]
    load_factor: float = DEFAULT_LOAD_FACTOR
    bound_rung: int = DEFAULT_BOUND_RUNG
    recovery_factor: float = DEFAULT_RECOVERY_FACTOR
    recovery_hold_s: float = DEFAULT_RECOVERY_HOLD_S
    warmup_s: float = DEFAULT_WARMUP_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    policy_lag_bound_s: float = DEFAULT_POLICY_LAG_BOUND_S
    allow_config_mismatch: bool = False
    seed: int = 1
    contract: EndpointContract = KOKORO  # the ladder's (`contract_of_ladder`)


@dataclass(frozen=True)
class Level:
    """The plan's scale-out level: the fleet's requests/s per instance where it acts (its
    sizing rate), and the period of its target tracking's alarm (the step starts one)."""

    rps_per_instance: float
    period_s: int


def scale_out_level(plan: PlanArtifact) -> Level:
    shape = deploy_shape_of(plan)
    tracking = next((p for p in shape.policies if isinstance(p, TargetTrackingSpec)), None)
    if tracking is None or shape.sizing_rps <= 0:
        raise RefusalError(
            f"plan {plan.plan_id} deploys no target tracking with a load level to cross; an "
            "organic T_total needs one"
        )
    return Level(shape.sizing_rps, tracking.high_alarm.period_s)


@dataclass
class Timeline:
    """What the watch saw, on the service's clock."""

    desired_set: float | None = None
    count: int = 0
    stream: str | None = None
    visible: float | None = None
    markers: dict[str, float] | None = None
    in_service: float | None = None
    recovered: float | None = None
    scaled_in: tuple[int, int] | None = None  # the policy took capacity back before recovery


@dataclass(frozen=True)
class Probe:
    """The open-loop probe: the schedule, and the sender running it on a thread."""

    sender: OpenLoopSender
    thread: threading.Thread
    step_s: float
    started_s: float

    def stop(self) -> list[Sample]:
        self.sender.stop()
        self.thread.join()
        self.sender.close()
        return list(self.sender.finished)


def start_probe(
    client: Any,
    request: OrganicTtotalRequest,
    clock: ServiceClock,
    rate_per_service_s: float,
    period_s: int,
) -> Probe:
    """Poisson arrivals at WARMUP_FACTOR × the rate, stepping to the rate at the first period
    boundary after the warm-up, until the timeout; sent from a thread."""
    started = clock.now()
    step = math.ceil((started + request.warmup_s) / period_s) * period_s
    rng = np.random.default_rng(request.seed)
    times: list[float] = []
    t, end = started, step + request.timeout_s
    while t < end:
        rate = rate_per_service_s * (WARMUP_FACTOR if t < step else 1.0)
        t += float(rng.exponential(1.0 / rate))
        if t >= step and times and times[-1] < step:
            t = max(t, step)
        times.append(t)
    sender = OpenLoopSender(
        "",
        Transport.RESPONSE_STREAM,
        request.utterances,
        EpochClock(),
        StreamEndpoint(client, request.endpoint, request.variant),
        PROBE_THREADS,
        request.contract,
    )
    intended = [clock.to_wall(x) for x in times]
    thread = threading.Thread(
        target=lambda: asyncio.run(sender.run(intended)), name="organic-probe", daemon=True
    )
    thread.start()
    return Probe(sender, thread, step, started)


def probe_samples(samples: Sequence[Sample], clock: ServiceClock) -> list[ProbeSample]:
    """On the service's clock, TTFAB from the intended send time; a refusal has none."""
    return [
        ProbeSample(
            clock.to_virtual(s.end),
            s.intended_ttfab_ms if s.outcome is Outcome.OK else None,
            s.latency_ms,
            clock.to_virtual(s.start),
            s.detail,
        )
        for s in samples
    ]


def concurrency_crossing(
    samples: Sequence[ProbeSample], since_s: float, level: float, instances: int
) -> float | None:
    """The first moment at or after `since_s` when the probe's requests in flight per instance
    exceed `level` (a refused request was never in flight at a container)."""
    events = sorted(
        [(s.start, 1) for s in samples if s.start is not None and s.ok]
        + [(s.end, -1) for s in samples if s.start is not None and s.ok]
    )
    in_flight = 0
    for at, change in events:
        in_flight += change
        if at >= since_s and in_flight > level * instances:
            return at
    return None


def watch(
    session: AwsSession,
    request: OrganicTtotalRequest,
    probe: Probe,
    clock: ServiceClock,
    scaling: LiveScaling,
    bound_ms: float,
    known: set[str],
    progress: Callable[[str], None],
) -> Timeline:
    """Poll the endpoint, the logs and the probe until the probe has recovered."""
    seen = Timeline()
    poller_every = min(max(clock.wall_seconds(POLL_SERVICE_S), MIN_POLL_WALL_S), POLL_SERVICE_S)
    deadline = probe.step_s + request.timeout_s
    client = session.client("sagemaker")
    while clock.now() < deadline:
        described = client.describe_endpoint(EndpointName=request.endpoint)
        variant = next(
            v for v in described["ProductionVariants"] if v["VariantName"] == request.variant
        )
        desired, current = (
            int(variant.get("DesiredInstanceCount") or 0),
            int(variant.get("CurrentInstanceCount") or 0),
        )
        now = clock.now()
        if seen.desired_set is None and desired > scaling.desired:
            seen.desired_set, seen.count = now, desired
            progress(f"desired count {scaling.desired} -> {desired}: the policy scaled out")
        if seen.desired_set is not None and desired < seen.count and seen.scaled_in is None:
            # A scale-out ends the scale-in cooldown (AWS as documented): a policy whose
            # scale-in level the new fleet is under takes the capacity back at once.
            seen.scaled_in = (seen.count, desired)
            progress(f"desired count {seen.count} -> {desired}: the policy scaled in again")
        if seen.desired_set is not None:
            _watch_instance(session, request, seen, known, progress)
            # The count asked for is serving (the endpoint may still be Updating: the policy
            # can have asked for more meanwhile).
            if seen.in_service is None and current >= seen.count:
                seen.in_service = now
                progress(f"InService with {current} instances; waiting for the probe to recover")
        if seen.in_service is not None and seen.visible is not None:
            samples = probe_samples(probe.sender.finished, clock)
            recovered = recovery_time(
                samples,
                seen.in_service,
                bound_ms,
                request.recovery_hold_s,
                clock.now(),
                ROLLING_WINDOW_S,
            )
            if recovered is not None:
                seen.recovered = recovered
                progress(f"traffic recovered {recovered - seen.in_service:.1f} s after InService")
                return seen
        time.sleep(poller_every)
    reached = (
        "the policy did not scale out"
        if seen.desired_set is None
        else ("traffic did not recover" if seen.in_service else "no new instance served")
    )
    if seen.scaled_in is not None:
        raise TtotalError(
            f"{reached} within {request.timeout_s:g} s: the policy scaled in "
            f"({seen.scaled_in[0]} -> {seen.scaled_in[1]}) before the probe recovered (a "
            "scale-out ends the scale-in cooldown, docs/aws-semantics.md); suspend dynamic "
            "scale-in on the scalable target for the measurement and run it again"
        )
    raise TtotalError(
        f"{reached} within {request.timeout_s:g} s of the step to {request.load_factor:g} × the "
        "scale-out level; raise --load-factor or --timeout-s"
    )


def _watch_instance(
    session: AwsSession,
    request: OrganicTtotalRequest,
    seen: Timeline,
    known: set[str],
    progress: Callable[[str], None],
) -> None:
    if seen.stream is None:
        new = {
            name: created
            for name, created in instance_streams(
                session, request.endpoint, request.variant
            ).items()
            if name not in known
        }
        if new:
            seen.stream, seen.visible = min(new.items(), key=lambda item: item[1])
            progress(f"instance visible: log stream {seen.stream}")
    if seen.stream is not None and not all(m in (seen.markers or {}) for m in CONTAINER_MARKERS):
        seen.markers = stream_markers(session, request.endpoint, seen.stream)


@dataclass(frozen=True)
class Detected:
    """The detection read back: the acting alarm and its stages' times."""

    alarm: DeployedAlarm
    crossed: float
    first_over: float
    in_alarm: float
    activity: float
    dips: int = 0  # datapoints back under the level between the first over and the alarm


def read_detection(
    session: AwsSession,
    watched: Watched,
    since: float,
    until: float,
    crossing: Callable[[DeployedAlarm], float | None],
) -> Detected:
    """The first scale-out after `since`, the alarm its cause names, when the load crossed that
    alarm's level (`crossing`), its first breaching datapoint after that and its change to
    ALARM, each from its own API."""
    outs = [
        a
        for a in read_activities(session, watched, since, until, 0.0)
        if a.alarm is not None and a.after > a.before
    ]
    if not outs:
        raise TtotalError(
            "DescribeScalingActivities shows no scale-out that names one of the deployed alarms; "
            "the desired count was changed by something else"
        )
    activity = outs[0]
    alarm = next(a for a in watched.alarms if a.rule.name == activity.alarm)
    crossed = crossing(alarm)
    if crossed is None or crossed > activity.t_s:
        raise TtotalError(
            f"the probe's load never passed alarm {alarm.rule.name}'s level before its scale-out; "
            "raise --load-factor"
        )
    changes = [
        t
        for t in read_transitions(session, watched, crossed - 1, until, 0.0)
        if t.alarm == alarm.rule.name
        and t.new == "ALARM"
        and t.t_s <= activity.t_s + ENDPOINT_SKEW_S
    ]
    if not changes:
        raise TtotalError(f"DescribeAlarmHistory shows alarm {alarm.rule.name} never in ALARM")
    only = Watched(watched.endpoint, watched.variant, (alarm,))
    period = alarm.rule.period_s
    read = read_datapoints(session, only, crossed - period, changes[-1].t_s, 0.0)
    points = read[alarm.rule.name]
    first_over = first_breach(points, alarm.rule, crossed, changes[-1].t_s)
    dips = sum(
        1
        for p in points
        if first_over - period < p.start_s < changes[-1].t_s - period
        and not aws_scaling.breaches(p.value, alarm.rule.comparison, alarm.rule.threshold)
    )
    return Detected(alarm, crossed, first_over, changes[-1].t_s, activity.t_s, dips)


def first_breach(
    points: Sequence[aws_scaling.Datapoint],
    rule: aws_scaling.AlarmRule,
    crossed: float,
    in_alarm: float,
) -> float:
    """When the first datapoint over the alarm's level after the load crossed it was complete
    (its period's end). Refused when the alarm went to ALARM before then: it acted on an
    earlier datapoint, one the metric breached at the warm-up load (a 10 s Maximum catches a
    lone instance's spikes), so the scale-out times no detection of the probe's step."""
    over = [
        p
        for p in points
        if p.start_s + rule.period_s > crossed
        and aws_scaling.breaches(p.value, rule.comparison, rule.threshold)
    ]
    if not over:
        raise TtotalError(
            f"CloudWatch returns no datapoint of {rule.metric} over {rule.threshold:g} "
            "after the crossing, yet its alarm went to ALARM"
        )
    first_over = over[0].start_s + rule.period_s
    if in_alarm < first_over - ENDPOINT_SKEW_S:
        raise TtotalError(
            f"alarm {rule.name} went to ALARM {first_over - in_alarm:.1f} s before the first "
            f"datapoint of {rule.metric} over {rule.threshold:g} after the load crossed it was "
            "complete: it acted on an earlier datapoint, over the level at the warm-up load, so "
            "this scale-out is no detection of the step; start from more instances in service "
            "(on the local cloud, --min-instances 3), where the warm-up load stays under the level"
        )
    return first_over


def client_level(plan: PlanArtifact, alarm: DeployedAlarm) -> float:
    """An alarm's threshold in the client's units: ÷ the CloudWatch ratio its role was
    converted with."""
    ratio = plan.target_units.cw_ratio
    if alarm.kind == "step" and alarm.scales_out and plan.fleet and plan.fleet.burst:
        ratio = plan.fleet.burst.units.cw_ratio
    return alarm.rule.threshold / ratio


def crossing_of(
    plan: PlanArtifact, samples: Sequence[ProbeSample], step_s: float, instances: int
) -> Callable[[DeployedAlarm], float | None]:
    """When the load crossed an alarm's level: the step, on a rate metric; on a concurrency
    metric, when the probe's requests in flight per instance first passed the level."""

    def crossed(alarm: DeployedAlarm) -> float | None:
        if alarm.rule.metric == SAGEMAKER_INVOCATIONS_PER_INSTANCE:
            return step_s
        return concurrency_crossing(samples, step_s, client_level(plan, alarm), instances)

    return crossed


def organic_plan(path: Path, fingerprint_of_ladder: Fingerprint) -> PlanArtifact:
    """The plan deployed on the endpoint: the ladder's build's, or refused."""
    plan = load_artifact(path, PlanArtifact)
    if plan.fingerprint != fingerprint_of_ladder:
        raise RefusalError(
            f"--plan {path}: made for another build than --qmax (fingerprints differ); give the "
            "plan derived from this ladder, deployed on the endpoint"
        )
    return plan


def stage_points(detected: Detected, seen: Timeline) -> list[tuple[str, float]]:
    assert seen.desired_set and seen.visible and seen.in_service and seen.recovered  # watch
    points = [
        ("load_crossed", detected.crossed),
        ("first_datapoint_over", detected.first_over),
        ("alarm", detected.in_alarm),
        ("scaling_activity", detected.activity),
        ("desired_set", seen.desired_set),
        ("instance_visible", seen.visible),
    ]
    points += [(m, (seen.markers or {})[m]) for m in CONTAINER_MARKERS if m in (seen.markers or {})]
    return [*points, ("in_service", seen.in_service), ("traffic_recovered", seen.recovered)]


def _refusals(
    session: AwsSession, request: OrganicTtotalRequest
) -> tuple[PlanArtifact, EndpointTarget, ServiceClock, LiveScaling, float]:
    """Everything checked before the probe sends: the ladder, the plan, the endpoint, its
    scaling live and the plan's, the clock, a free instance."""
    if not 1 < request.load_factor <= 10:
        raise RefusalError(
            f"--load-factor {request.load_factor:g}: give more than 1 (past the scale-out level) "
            "and at most 10"
        )
    qmax, fingerprint = sagemaker_qmax(request.qmax_path)
    plan = organic_plan(request.plan_path, fingerprint)
    bound_ms = recovery_bound_ms(
        qmax, request.qmax_path, request.bound_rung, request.recovery_factor
    )
    target = read_endpoint_target(
        session, request.endpoint, request.variant, Transport.RESPONSE_STREAM, request.model
    ).under_contract(request.contract.ref)
    check_pairing(
        fingerprint, target, request.qmax_path, request.allow_config_mismatch, lambda _: None
    )
    target.refuse_not_in_service()
    clock = service_clock(None, target.emulated)
    # Its dynamic scale-in may rest: a scale-out ends the scale-in cooldown, and a policy whose
    # scale-in level the new fleet is under would take the capacity back before it recovers.
    scaling = read_live_scaling(session, request.endpoint, request.variant, plan, True)
    quota = read_quota_check(session, target.fingerprint.instance_type)
    quota.require(1)
    return plan, target, clock, scaling, bound_ms * target.rate_scale


def measure_organic_ttotal(
    session: AwsSession, request: OrganicTtotalRequest, progress: Callable[[str], None]
) -> TtotalArtifact:
    plan, target, clock, scaling, bound_ms = _refusals(session, request)
    level = scale_out_level(plan)
    fleet_rps = request.load_factor * level.rps_per_instance * scaling.in_service
    thinning = target.rate_scale * clock.scale
    known = set(instance_streams(session, request.endpoint, request.variant))
    client = runtime_client(session.region, PROBE_THREADS)
    probe = start_probe(client, request, clock, fleet_rps / thinning, level.period_s)
    progress(
        f"probe: {WARMUP_FACTOR:g} × the scale-out level ({level.rps_per_instance:.4g} requests/s "
        f"per instance, {scaling.in_service} in service) for {probe.step_s - probe.started_s:.0f} s, "
        f"then {request.load_factor:g} × from {probe.step_s - probe.started_s:.0f} s on"
    )
    try:
        seen = watch(session, request, probe, clock, scaling, bound_ms, known, progress)
    finally:
        samples = probe_samples(probe.stop(), clock)
    watched = Watched(request.endpoint, request.variant, scaling.alarms)
    crossing = crossing_of(plan, samples, probe.step_s, scaling.in_service)
    detected = read_detection(session, watched, probe.step_s, clock.now(), crossing)
    reasons = {"instance_visible": CURVE_STAGES if target.curve_modelled else EMULATED_PROVISIONING}
    events = recorded_events(
        probe.started_s,
        stage_points(detected, seen),
        ENDPOINT_SKEW_S,
        reasons if target.emulated else None,
        counted_from="desired_set",
    )
    stages = stages_from_events(events)
    measured = measured_total_s(stages)
    lag = round(sum(s.seconds for s in stages if s.name.split(" ->")[0] in DETECTION), 3)
    progress(
        f"detection lag {lag:.1f} s ({detected.alarm.rule.name}; modelled "
        f"{detected.alarm.rule.detection_s} s); the endpoint is left as its policy leaves it"
    )
    return TtotalArtifact(
        fingerprint=plan.fingerprint,
        trigger=Trigger.ORGANIC,
        stages=stages,
        measured_total_s=measured,
        policy_lag_bound_s=request.policy_lag_bound_s,
        planned_total_s=measured + request.policy_lag_bound_s,
        recovery_rule=recovery_rule(
            0, request.bound_rung, request.recovery_factor, request.recovery_hold_s
        ).replace("probe held at concurrency 0", "open-loop probe"),
        qmax_sha256=sha256_file(request.qmax_path),
        detection=Detection(
            lag_s=lag,
            modelled_s=detected.alarm.rule.detection_s,
            policy_role=detected.alarm.role,
            alarm=detected.alarm.rule.name,
            deploy_shape=detection_shape(deploy_shape_of(plan)),
            plan_id=plan.plan_id,
            load_factor=request.load_factor,
            dips=detected.dips,
        ),
        events=events,
        provenance=Provenance.now(
            target.provenance_kind,
            target.source,
            curve_modelled=target.curve_modelled,
            notes=_notes(samples, probe, bound_ms, thinning, fleet_rps, detected.dips),
        ),
    )


def _notes(
    samples: Sequence[ProbeSample],
    probe: Probe,
    bound_ms: float,
    thinning: float,
    rps: float,
    dips: int,
) -> str:
    after = [s for s in samples if s.end >= probe.step_s]
    ttfab = [s.ttfab_ms for s in after if s.ttfab_ms is not None]
    p95 = f"{np.percentile(ttfab, 95):.0f} ms" if ttfab else "-"
    return (
        f"open-loop probe at {rps:.4g} requests/s of the fleet's, each request sent standing for "
        f"{thinning:g}: {len(after)} requests after the step, {len(after) - len(ttfab)} failed or "
        f"shed, p95 TTFAB {p95} (wall clock); recovery bound {bound_ms:.0f} ms"
        + (
            f"; the metric fell back under the level {dips} time(s) before the alarm, each a "
            "period more: a load this near the level is within the metric's noise"
            if dips
            else ""
        )
    )
