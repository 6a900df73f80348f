"""T_total on a SageMaker endpoint: force one more instance under a probe load (SPEC §4 step 4).

Under the freeze (scaling suspended, one instance pinned) a closed-loop probe holds load over
`response-stream`; then UpdateEndpointWeightsAndCapacities asks for one more instance, bypassing
the policies. Each stage is timestamped from its own source:
- `desired_set`: our capacity call accepted (its return);
- `instance_visible`: the creationTime of the new instance's log stream;
- `container_started` … `warmup_done`: the start-up markers in that stream (the container's clock);
- `in_service`: the first DescribeEndpoint that shows InService with the new count;
- `traffic_recovered`: the probe's p95 TTFAB back within the ladder-based bound, held for the
  hold time (by default a probe at 10 against 1.25 × the c=5 rung's p95, held 60 s).
The probe's warm-up before `desired_set` is recorded, not counted. The freeze's exit restores the
capacity. A free instance quota is checked first. Through the local cloud the artifact is
`emulated`, and the stage that holds its provisioning stand-in says so.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.schema import (
    Provenance,
    QmaxArtifact,
    Stage,
    Trigger,
    TtotalArtifact,
    load_artifact,
    sha256_file,
)
from tts_bench.aws.freeze import frozen_scaling
from tts_bench.aws.session import AwsSession
from tts_bench.deployment import DEFAULT_POLICY_LAG_BOUND_S, SCALABLE_DIMENSION, SERVICE_NAMESPACE
from tts_bench.errors import RefusalError, TtsBenchError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.quota import read_quota_check
from tts_bench.measure.response_stream import failure_of, invoke, payload_lines, runtime_client
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target
from tts_bench.telemetry import STARTUP_MARKERS

DEFAULT_PROBE_CONCURRENCY: Final = 10
DEFAULT_BOUND_RUNG: Final = 5
DEFAULT_RECOVERY_FACTOR: Final = 1.25
DEFAULT_RECOVERY_HOLD_S: Final = 60.0
DEFAULT_WARMUP_S: Final = 30.0
DEFAULT_TIMEOUT_S: Final = 1800.0
ROLLING_WINDOW_S: Final = 10.0
POLL_S: Final = 1.0

DESIRED_SET: Final = "desired_set"
INSTANCE_VISIBLE: Final = "instance_visible"
IN_SERVICE: Final = "in_service"
TRAFFIC_RECOVERED: Final = "traffic_recovered"
LOAD_APPLIED: Final = "load_applied"
# The container's markers that are stages of their own; `ready` is what InService follows.
CONTAINER_MARKERS: Final = tuple(m for m in STARTUP_MARKERS if m != "ready")
EMULATED_PROVISIONING: Final = (
    "emulated: the local cloud has no EC2 provisioning or image pull; this stage is its "
    "stand-in delay (--provision-delay-s) plus a process spawn"
)


class TtotalError(TtsBenchError):
    """The scale-out did not complete, or its stages cannot be read."""


# --------------------------------------------------------------------------- pure rules


@dataclass(frozen=True, slots=True)
class ProbeSample:
    end: float
    ttfab_ms: float | None  # None: failed, or no audio (counts as over any bound)
    latency_ms: float | None = None  # to the stream's end


def rolling_p95_ok(samples: Sequence[ProbeSample], bound_ms: float, window_s: float) -> list[bool]:
    """For each sample (sorted by end): is the p95 TTFAB of the trailing window within bound?"""
    ends = np.array([s.end for s in samples])
    # A failure is slower than any bound (finite, so interpolation stays a number).
    values = np.array([1e12 if s.ttfab_ms is None else s.ttfab_ms for s in samples])
    verdicts = []
    for i, end in enumerate(ends):
        lo = int(np.searchsorted(ends, end - window_s, side="right"))
        window = values[lo : i + 1]
        verdicts.append(bool(np.percentile(window, 95) <= bound_ms))
    return verdicts


def recovery_time(
    samples: Sequence[ProbeSample],
    since: float,
    bound_ms: float,
    hold_s: float,
    now: float,
    window_s: float = ROLLING_WINDOW_S,
) -> float | None:
    """The first request end t ≥ `since` from which the rolling p95 stays within `bound_ms`
    at every request end through t + `hold_s`; None until `now` has passed t + `hold_s`."""
    ordered = sorted(samples, key=lambda s: s.end)
    ok = rolling_p95_ok(ordered, bound_ms, window_s)
    ends = [s.end for s in ordered]
    for i, start in enumerate(ends):
        if start < since or not ok[i]:
            continue
        if start + hold_s > now:
            return None
        horizon = [ok[j] for j in range(i, len(ends)) if ends[j] <= start + hold_s]
        if all(horizon):
            return start
    return None


def scale_out_stages(
    load_applied: float,
    desired_set: float,
    instance_visible: float,
    markers: dict[str, float],
    in_service: float,
    recovered: float,
    *,
    emulated: bool,
) -> list[Stage]:
    """Warm-up (not counted), then each stage between consecutive timestamps (counted)."""
    points = [(DESIRED_SET, desired_set), (INSTANCE_VISIBLE, instance_visible)]
    points += [(m, markers[m]) for m in CONTAINER_MARKERS if m in markers]
    points += [(IN_SERVICE, in_service), (TRAFFIC_RECOVERED, recovered)]
    stages = [
        Stage(
            name=f"{LOAD_APPLIED} -> {DESIRED_SET}",
            seconds=round(max(0.0, desired_set - load_applied), 3),
            measured=True,
            counted=False,
        )
    ]
    for (a, ta), (b, tb) in itertools.pairwise(points):
        # Sources differ (our clock, CloudWatch Logs', the container's): a small step back is
        # clock skew, a large one a wrong reading.
        if tb < ta - 1.0:
            raise TtotalError(f"stage {a} -> {b} runs backwards ({tb - ta:.3f} s): clocks disagree")
        reason = EMULATED_PROVISIONING if emulated and b == INSTANCE_VISIBLE else None
        stages.append(
            Stage(
                name=f"{a} -> {b}",
                seconds=round(max(0.0, tb - ta), 3),
                measured=True,
                reason=reason,
                counted=True,
            )
        )
    return stages


def recovery_rule(probe: int, bound_rung: int, factor: float, hold_s: float) -> str:
    return (
        f"probe held at concurrency {probe}; recovered when its p95 TTFAB falls within "
        f"{factor:g}x of the ladder's c={bound_rung} rung p95 and stays there for {hold_s:g} s"
    )


# --------------------------------------------------------------------------- the probe


@dataclass
class StreamProbe:
    """`concurrency` closed-loop threads invoking the endpoint over response-stream."""

    client: Any
    endpoint: str
    variant: str | None
    utterances: Sequence[Utterance]
    concurrency: int
    samples: list[ProbeSample] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def one(self, utterance: Utterance) -> ProbeSample:
        start = time.perf_counter()
        ttfab_ms: float | None = None
        done = False
        stream = None
        context_id = uuid.uuid4().hex[:12]
        try:
            stream = invoke(self.client, self.endpoint, utterance.request(context_id), self.variant)
            ended = False
            for line in payload_lines(stream):  # to the end: the connection stays pooled
                event = {} if ended else json.loads(line)
                kind = event.get("type")
                if kind == "chunk" and ttfab_ms is None:
                    ttfab_ms = (time.perf_counter() - start) * 1000
                elif kind in ("done", "error"):
                    done, ended = kind == "done", True
                    if kind == "error":
                        self.failures.append(f"{event.get('status_code')}: {event.get('error')}")
            if not ended:
                self.failures.append("the stream ended without a done event")
        except Exception as exc:
            failure = failure_of(exc)
            if failure is None:
                raise
            self.failures.append(failure[0])
        finally:
            if stream is not None:
                stream.close()
        latency_ms = (time.perf_counter() - start) * 1000
        return ProbeSample(time.time(), ttfab_ms if done else None, latency_ms if done else None)

    def _loop(self, offset: int) -> None:
        for i in itertools.count(offset):
            if self._stop.is_set():
                return
            self.samples.append(self.one(self.utterances[i % len(self.utterances)]))

    def start(self) -> StreamProbe:
        for k in range(self.concurrency):
            thread = threading.Thread(target=self._loop, args=(k,), name=f"probe-{k}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=75.0)

    def summary(self, since: float) -> str:
        done = [s for s in self.samples if s.end >= since]
        ttfab = [s.ttfab_ms for s in done if s.ttfab_ms is not None]
        p95 = f"{np.percentile(ttfab, 95):.0f} ms" if ttfab else "-"
        return (
            f"probe at {self.concurrency}: {len(done)} requests after desired_set, "
            f"{len(done) - len(ttfab)} failed, p95 TTFAB {p95}"
        )


# --------------------------------------------------------------------------- AWS edge


def log_group(endpoint: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint}"


def instance_streams(session: AwsSession, endpoint: str, variant: str) -> dict[str, float]:
    """The variant's instance log streams: name → creationTime (unix seconds)."""
    group = log_group(endpoint)
    try:
        streams = session.paginate(
            "logs",
            "describe_log_streams",
            "logStreams",
            resource=f"log group {group}",
            logGroupName=group,
            logStreamNamePrefix=f"{variant}/",
        )
    except TtsBenchError as exc:
        if "ResourceNotFoundException" in str(exc):
            return {}
        raise
    return {s["logStreamName"]: s["creationTime"] / 1000.0 for s in streams}


def stream_markers(session: AwsSession, endpoint: str, stream: str) -> dict[str, float]:
    """Start-up markers in an instance's log stream: name → the container's own timestamp."""
    events = session.call(
        "logs",
        "get_log_events",
        resource=f"log stream {stream}",
        logGroupName=log_group(endpoint),
        logStreamName=stream,
        startFromHead=True,
    ).get("events", [])
    markers: dict[str, float] = {}
    for event in events:
        try:
            line = json.loads(event.get("message", ""))
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("msg") == "startup_marker" and "marker" in line:
            stamp = line.get("ts", event.get("timestamp", 0) / 1000.0)
            markers.setdefault(str(line["marker"]), float(stamp))
    return markers


def variant_state(session: AwsSession, endpoint: str, variant: str) -> tuple[str, int | None]:
    described = session.call(
        "sagemaker", "describe_endpoint", resource=f"endpoint {endpoint}", EndpointName=endpoint
    )
    for entry in described.get("ProductionVariants", []):
        if entry["VariantName"] == variant:
            return str(described.get("EndpointStatus")), entry.get("CurrentInstanceCount")
    return str(described.get("EndpointStatus")), None


def allow_forced_count(session: AwsSession, endpoint: str, variant: str, count: int) -> None:
    """Raise the (suspended) scalable target's max to `count`, so the forced count stands."""
    from tts_bench.aws.deployed import SuspendedState
    from tts_bench.deployment import resource_id

    rid = resource_id(endpoint, variant)
    targets = session.call(
        "application-autoscaling",
        "describe_scalable_targets",
        resource=f"scalable target {rid}",
        ServiceNamespace=SERVICE_NAMESPACE,
        ResourceIds=[rid],
        ScalableDimension=SCALABLE_DIMENSION,
    ).get("ScalableTargets", [])
    if targets:
        session.call(
            "application-autoscaling",
            "register_scalable_target",
            resource=f"scalable target {rid}",
            ServiceNamespace=SERVICE_NAMESPACE,
            ResourceId=rid,
            ScalableDimension=SCALABLE_DIMENSION,
            MinCapacity=targets[0]["MinCapacity"],
            MaxCapacity=max(count, targets[0]["MaxCapacity"]),
            SuspendedState=SuspendedState.all(True).to_api(),
        )


def force_desired(session: AwsSession, endpoint: str, variant: str, count: int) -> float:
    """UpdateEndpointWeightsAndCapacities to `count`; returns when the call was accepted."""
    session.call(
        "sagemaker",
        "update_endpoint_weights_and_capacities",
        resource=f"variant {variant} of endpoint {endpoint}",
        EndpointName=endpoint,
        DesiredWeightsAndCapacities=[{"VariantName": variant, "DesiredInstanceCount": count}],
    )
    return time.time()


# --------------------------------------------------------------------------- the measurement


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


def recovery_bound_ms(qmax: QmaxArtifact, path: Path, bound_rung: int, factor: float) -> float:
    rung = qmax.rung(bound_rung)
    if rung is None or rung.ttfab_p95_ms is None or not rung.usable:
        measured = [r.concurrency for r in qmax.rungs if r.usable and r.ttfab_p95_ms is not None]
        raise RefusalError(
            f"{path}: no usable c={bound_rung} rung to judge recovery by; pass --bound-rung "
            f"with one of {measured}"
        )
    return factor * rung.ttfab_p95_ms


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
    bound_ms = recovery_bound_ms(
        qmax, request.qmax_path, request.bound_rung, request.recovery_factor
    )
    transport = fingerprint.transport
    target = read_endpoint_target(
        session, request.endpoint, request.variant, transport, request.model
    )
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
        probe = StreamProbe(
            client, request.endpoint, request.variant, request.utterances,
            request.probe_concurrency,
        )  # fmt: skip
        load_applied = time.time()
        progress(f"probe: {request.probe_concurrency} closed-loop users over {transport.value}")
        probe.start()
        try:
            time.sleep(request.warmup_s)
            desired_set = force_desired(session, request.endpoint, request.variant, count)
            progress(f"desired count {count} accepted; timing the scale-out")
            timeline = watch_scale_out(
                session, request, probe, known, count, desired_set, bound_ms, progress
            )
        finally:
            probe.stop()
        summary = probe.summary(desired_set)
    stages = scale_out_stages(load_applied, desired_set, *timeline, emulated=target.emulated)
    measured_total = round(sum(s.seconds for s in stages if s.counted), 3)
    notes = [summary, f"recovery bound {bound_ms:.0f} ms", quota.describe()]
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
        ),
        qmax_sha256=sha256_file(request.qmax_path),
        provenance=Provenance.now(
            target.provenance_kind,
            target.source,
            command=" ".join(["tts-bench", *sys.argv[1:]]) if sys.argv else None,
            notes="; ".join(notes),
            curve_modelled=target.curve_modelled,
        ),
    )


def watch_scale_out(
    session: AwsSession,
    request: SageMakerTtotalRequest,
    probe: StreamProbe,
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
        f"{reached} within {request.timeout_s:g} s of desired_set; {probe.summary(desired_set)}"
    )
