"""T_total on a SageMaker endpoint: force one more instance under a probe load (SPEC §4 step 4).

Under the freeze (scaling suspended, one instance pinned) a closed-loop probe holds load over
`response-stream`; then UpdateEndpointWeightsAndCapacities asks for one more instance, bypassing
the policies. Each stage is timestamped from its own source:
- `desired_set`: our capacity call accepted (its return);
- `instance_visible`: the creationTime of the new instance's log stream;
- `container_started` … `warmup_done`: the start-up markers in that stream (the container's clock);
- `in_service`: the first DescribeEndpoint that shows InService with the new count;
- `traffic_recovered`: the probe's p95 TTFAB back within the ladder-based bound, held for the
  hold time (by default a probe at 10 against 1.25 × the c=5 rung's p95, held 60 s). A probe
  that holds the bound rung's users is that rung again on the one instance, so its p95 just
  before the scale-out is read too and the larger of the two is the baseline
  (`recovery_baseline`, recorded in the artifact).
The probe's warm-up before `desired_set` is recorded, not counted. The freeze's exit restores the
capacity. A free instance quota is checked first. Through the local cloud the artifact is
`emulated`, and the stage that holds its provisioning stand-in says so.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import RecoveryBaseline, Trigger, TtotalArtifact, TtotalEvents
from tts_bench.aws.freeze import frozen_scaling
from tts_bench.aws.session import AwsSession
from tts_bench.deployment import DEFAULT_POLICY_LAG_BOUND_S
from tts_bench.errors import RefusalError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target
from tts_bench.measure.transport.contract import KOKORO, EndpointContract
from tts_bench.measure.transport.response_stream import runtime_client
from tts_bench.measure.ttotal.aws import (
    allow_forced_count,
    force_desired,
    instance_streams,
    stream_markers,
    variant_state,
)
from tts_bench.measure.ttotal.probe import Probe, ProbeSample, StreamSpeaker, TtotalError
from tts_bench.measure.ttotal.quota import read_quota_check
from tts_bench.measure.ttotal.recovery import (
    BASELINE_MIN_REQUESTS,
    recovery_baseline,
    recovery_rule,
    recovery_time,
)
from tts_bench.measure.ttotal.stages import measured_total_s, recorded_events, stages_from_events
from tts_bench.telemetry import STARTUP_MARKERS

DEFAULT_PROBE_CONCURRENCY: Final = 10
DEFAULT_BOUND_RUNG: Final = 5
DEFAULT_RECOVERY_FACTOR: Final = 1.25
DEFAULT_RECOVERY_HOLD_S: Final = 60.0
DEFAULT_WARMUP_S: Final = 30.0
DEFAULT_TIMEOUT_S: Final = 1800.0
# How long the probe may hold the bound rung's users past its warm-up for a baseline's requests.
BASELINE_WAIT_S: Final = 60.0
POLL_S: Final = 1.0
# Our clock, CloudWatch Logs' and the container's: a step back this small is clock skew.
ENDPOINT_SKEW_S: Final = 1.0

DESIRED_SET: Final = "desired_set"
INSTANCE_VISIBLE: Final = "instance_visible"
IN_SERVICE: Final = "in_service"
TRAFFIC_RECOVERED: Final = "traffic_recovered"
# The container's markers that are stages of their own; `ready` is what InService follows.
CONTAINER_MARKERS: Final = tuple(m for m in STARTUP_MARKERS if m != "ready")
EMULATED_PROVISIONING: Final = (
    "emulated: the local cloud has no EC2 provisioning or image pull; this stage is its "
    "stand-in delay (--provision-delay-s) plus a process spawn"
)


def scale_out_events(
    load_applied: float,
    desired_set: float,
    instance_visible: float,
    markers: dict[str, float],
    in_service: float,
    recovered: float,
    *,
    emulated: bool,
) -> TtotalEvents:
    """Each timestamp from its own source, in order, and the note the emulated stage carries."""
    points = [(DESIRED_SET, desired_set), (INSTANCE_VISIBLE, instance_visible)]
    points += [(m, markers[m]) for m in CONTAINER_MARKERS if m in markers]
    points += [(IN_SERVICE, in_service), (TRAFFIC_RECOVERED, recovered)]
    reasons = {INSTANCE_VISIBLE: EMULATED_PROVISIONING} if emulated else {}
    return recorded_events(load_applied, points, ENDPOINT_SKEW_S, reasons)


@dataclass(frozen=True, slots=True)
class SageMakerTtotalRequest:
    qmax_path: Path
    endpoint: str
    variant: str
    model: str
    utterances: Sequence[Utterance]
    probe_concurrency: int = DEFAULT_PROBE_CONCURRENCY
    bound_rung: int = DEFAULT_BOUND_RUNG
    recovery_factor: float = DEFAULT_RECOVERY_FACTOR
    recovery_hold_s: float = DEFAULT_RECOVERY_HOLD_S
    warmup_s: float = DEFAULT_WARMUP_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    policy_lag_bound_s: float = DEFAULT_POLICY_LAG_BOUND_S
    allow_config_mismatch: bool = False
    contract: EndpointContract = KOKORO  # the ladder's (`contract_of_ladder`)


def sagemaker_qmax(path: Path) -> tuple[QmaxArtifact, Fingerprint]:
    """The ladder and its fingerprint, refused unless measured over a SageMaker transport."""
    qmax = load_artifact(path, QmaxArtifact)
    fingerprint = qmax.fingerprint
    if fingerprint is None or fingerprint.transport.is_local:
        transport = fingerprint.transport.value if fingerprint else "none"
        raise RefusalError(
            f"{path}: transport {transport}: T_total on an endpoint needs a ladder measured on it "
            "(response-stream); for a local ladder use `tts-bench ttotal --local`"
        )
    if fingerprint.transport is not Transport.RESPONSE_STREAM:
        raise RefusalError(
            f"{path}: transport {fingerprint.transport.value}: the T_total probe speaks "
            "response-stream; measure the ladder over --transport response-stream"
        )
    return qmax, fingerprint


def bound_rung_p95_ms(qmax: QmaxArtifact, path: Path, bound_rung: int) -> float:
    rung = qmax.rung(bound_rung)
    if rung is None or rung.ttfab_p95_ms is None or not rung.usable:
        measured = [r.concurrency for r in qmax.rungs if r.usable and r.ttfab_p95_ms is not None]
        raise RefusalError(
            f"{path}: no usable c={bound_rung} rung to judge recovery by; pass --bound-rung "
            f"with one of {measured}"
        )
    return rung.ttfab_p95_ms


def recovery_bound_ms(qmax: QmaxArtifact, path: Path, bound_rung: int, factor: float) -> float:
    return factor * bound_rung_p95_ms(qmax, path, bound_rung)


def baseline_samples(probe: Probe, min_requests: int, wait_s: float) -> list[ProbeSample]:
    """The probe's requests that started once each thread had ended one (a first request also
    opens its connection), waiting up to `wait_s` for `min_requests` of them to end."""
    deadline = time.time() + wait_s
    probe.wait_warm(wait_s)
    ends = sorted(s.end for s in list(probe.samples))
    warm_at = ends[probe.concurrency - 1] if len(ends) >= probe.concurrency else math.inf
    while True:
        warm = [s for s in list(probe.samples) if s.start is not None and s.start >= warm_at]
        if len(warm) >= min_requests or time.time() >= deadline:
            return warm
        time.sleep(POLL_S / 4)


def check_pairing(
    fingerprint: Fingerprint,
    target: EndpointTarget,
    path: Path,
    allow_mismatch: bool,
    log: Callable[[str], None],
) -> None:
    differences = fingerprint.differences(target.fingerprint)
    if differences:
        message = (
            f"{path} was measured on another build than endpoint {target.endpoint} serves "
            f"({'; '.join(differences)})"
        )
        if not allow_mismatch:
            raise RefusalError(message + "; measure its ladder first or --allow-config-mismatch")
        log(f"warning: {message}")


def measure_sagemaker_ttotal(
    session: AwsSession,
    request: SageMakerTtotalRequest,
    progress: Callable[[str], None],
) -> TtotalArtifact:
    qmax, fingerprint = sagemaker_qmax(request.qmax_path)
    ladder_p95_ms = bound_rung_p95_ms(qmax, request.qmax_path, request.bound_rung)
    transport = fingerprint.transport
    target = read_endpoint_target(
        session, request.endpoint, request.variant, transport, request.model
    ).under_contract(request.contract.ref)
    check_pairing(fingerprint, target, request.qmax_path, request.allow_config_mismatch, progress)
    target.refuse_not_in_service()
    quota = read_quota_check(session, target.fingerprint.instance_type)
    progress(f"quota: {quota.describe()}")
    # The freeze pins this variant to one instance and the force adds one: two in all.
    quota.require(max(0, 2 - (target.current_instances or 0)))

    client = runtime_client(session.region, request.probe_concurrency)
    with frozen_scaling(session, request.endpoint, request.variant, log=progress):
        _, before = variant_state(session, request.endpoint, request.variant)
        count = (before or 1) + 1
        allow_forced_count(session, request.endpoint, request.variant, count)
        known = set(instance_streams(session, request.endpoint, request.variant))
        speaker = StreamSpeaker(client, request.endpoint, request.variant, request.contract)
        probe = Probe(speaker, request.utterances, request.probe_concurrency)
        load_applied = time.time()
        progress(f"probe: {request.probe_concurrency} closed-loop users over {transport.value}")
        probe.start()
        try:
            time.sleep(request.warmup_s)
            baseline = measure_baseline(request, probe, ladder_p95_ms, progress)
            desired_set = force_desired(session, request.endpoint, request.variant, count)
            progress(f"desired count {count} accepted; timing the scale-out")
            timeline = watch_scale_out(
                session, request, probe, known, count, desired_set, baseline.bound_ms, progress
            )
        finally:
            probe.stop()
        summary = probe.summary(desired_set, counted=" after desired_set")
    events = scale_out_events(load_applied, desired_set, *timeline, emulated=target.emulated)
    stages = stages_from_events(events)
    measured_total = measured_total_s(stages)
    notes = [summary, f"recovery bound {baseline.bound_ms:.0f} ms", quota.describe()]
    if probe.failures:
        notes.append(f"probe failures: {len(probe.failures)} (first: {probe.failures[0]})")
    return TtotalArtifact(
        fingerprint=fingerprint,
        trigger=Trigger.FORCE_DESIRED,
        stages=stages,
        measured_total_s=measured_total,
        policy_lag_bound_s=request.policy_lag_bound_s,
        planned_total_s=measured_total + request.policy_lag_bound_s,
        recovery_rule=recovery_rule(
            request.probe_concurrency,
            request.bound_rung,
            request.recovery_factor,
            request.recovery_hold_s,
            remeasured=baseline.remeasured_p95_ms is not None,
        ),
        recovery_baseline=baseline,
        qmax_sha256=sha256_file(request.qmax_path),
        provenance=Provenance.now(
            target.provenance_kind,
            target.source,
            command=" ".join(["tts-bench", *sys.argv[1:]]) if sys.argv else None,
            notes="; ".join(notes),
            curve_modelled=target.curve_modelled,
        ),
        events=events,
    )


def measure_baseline(
    request: SageMakerTtotalRequest,
    probe: Probe,
    ladder_p95_ms: float,
    progress: Callable[[str], None],
) -> RecoveryBaseline:
    """The bound recovery is judged by. Where the probe holds the bound rung's users, they are
    that rung's load on the one instance, so its p95 is read again now, just before the
    scale-out: the machine may be busier than when the ladder ran (a local cloud's instances
    share its cores)."""
    if request.probe_concurrency != request.bound_rung:
        why = (
            f"the probe holds {request.probe_concurrency} users, the bound rung "
            f"{request.bound_rung}: not that rung's load on one instance"
        )
        baseline = recovery_baseline(ladder_p95_ms, request.recovery_factor, (), why)
    else:
        before = baseline_samples(probe, BASELINE_MIN_REQUESTS, BASELINE_WAIT_S)
        baseline = recovery_baseline(ladder_p95_ms, request.recovery_factor, before)
    again = (
        f", {baseline.remeasured_p95_ms:.0f} ms just before the scale-out over "
        f"{baseline.remeasured_requests} requests"
        if baseline.remeasured_p95_ms is not None
        else f" ({baseline.why_not_remeasured})"
    )
    progress(
        f"recovery bound {baseline.bound_ms:.0f} ms: {baseline.factor:g} x the c="
        f"{request.bound_rung} rung's p95, {ladder_p95_ms:.0f} ms in the ladder{again}"
    )
    return baseline


def watch_scale_out(
    session: AwsSession,
    request: SageMakerTtotalRequest,
    probe: Probe,
    known: set[str],
    count: int,
    desired_set: float,
    bound_ms: float,
    progress: Callable[[str], None],
) -> tuple[float, dict[str, float], float, float]:
    """Poll logs, DescribeEndpoint and the probe until traffic has recovered.

    Returns (instance_visible, markers, in_service, traffic_recovered)."""
    deadline = desired_set + request.timeout_s
    stream: str | None = None
    visible: float | None = None
    markers: dict[str, float] = {}
    in_service: float | None = None
    while time.time() < deadline:
        if stream is None:
            new = {
                name: created
                for name, created in instance_streams(
                    session, request.endpoint, request.variant
                ).items()
                if name not in known
            }
            if new:
                stream, visible = min(new.items(), key=lambda item: item[1])
                progress(f"instance visible: log stream {stream}")
        if stream is not None and not all(m in markers for m in CONTAINER_MARKERS[-1:]):
            markers = stream_markers(session, request.endpoint, stream)
        if in_service is None:
            status, current = variant_state(session, request.endpoint, request.variant)
            if status == "InService" and current == count:
                in_service = time.time()
                progress(f"InService with {count} instances; waiting for the probe to recover")
        if in_service is not None and stream is not None and visible is not None:
            markers = stream_markers(session, request.endpoint, stream)
            recovered = recovery_time(
                list(probe.samples), in_service, bound_ms, request.recovery_hold_s, time.time()
            )
            if recovered is not None:
                progress(f"traffic recovered {recovered - in_service:.1f} s after InService")
                return visible, markers, in_service, recovered
        time.sleep(POLL_S)
    reached = (
        "traffic did not recover"
        if in_service
        else ("the instance never came InService" if stream else "no new instance appeared")
    )
    raise TtotalError(
        f"{reached} within {request.timeout_s:g} s of desired_set; "
        f"{probe.summary(desired_set, counted=' after desired_set')}"
    )
