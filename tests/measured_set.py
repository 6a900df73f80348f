"""A measured (or emulated) set of artifacts built from synthetic raw data by the measuring code.

Closed-loop samples of a serial engine (each request waits for those ahead of it, so latency
grows with the users and throughput is flat), CPU readings, CloudWatch's datapoints as the
live join reads them and a scale-out's timestamps go through the code a real run goes through:
`ladder_rungs`, `build_qmax_artifact`, the CloudWatch joins, the verification rungs,
`scale_out_events`, `plan_from_files`. The artifacts, their samples, raw record and events are
written as a run writes them, so custody checks them as it checks a real run's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from tests.ladder.synthetic import closed_loop
from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT, LADDER_RATIO_STAT
from tts_bench.artifacts.files import sha256_file, write_artifact
from tts_bench.artifacts.fingerprint import (
    Fingerprint,
    Transport,
    qmax_filename,
    ttotal_filename,
)
from tts_bench.artifacts.provenance import Provenance, ProvenanceKind
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import Trigger, TtotalArtifact
from tts_bench.measure.ladder.live.cloudwatch_join import (
    MetricPoint,
    invocation_ratios_for,
    ratios_for,
)
from tts_bench.measure.ladder.live.verification import (
    all_levels,
    held_by_the_ladder,
    verification_from_runs,
    verification_ladder,
)
from tts_bench.measure.ladder.raw_record import QmaxRaw, raw_path, write_raw
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.statistics import CpuReading, build_qmax_artifact, ladder_rungs
from tts_bench.measure.samples import Sample, samples_path, write_samples
from tts_bench.measure.ttotal.sagemaker import scale_out_events
from tts_bench.measure.ttotal.stages import measured_total_s, stages_from_events
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.steps import PlanRequest

START_EPOCH = 1_800_000_000.0  # a multiple of CloudWatch's 10 s periods
LOCAL_DIGEST = "sha256:" + "cd" * 32
EMULATED_FINGERPRINT = Fingerprint(
    model="kokoro-82m",
    instance_type="ml.g5.xlarge",
    image_digest=LOCAL_DIGEST,
    transport=Transport.RESPONSE_STREAM,
)


@dataclass(frozen=True)
class MeasuredSet:
    qmax: Path
    ttotal: Path
    plan: Path


def serial_samples(schedule: LadderSchedule, start: float, service_ms: float) -> list[Sample]:
    """Each rung's users back to back, a request taking `service_ms` × the users (serial)."""
    samples: list[Sample] = []
    for index, users in enumerate(schedule.rungs):
        phase = schedule.rung_phase(index)
        samples += closed_loop(
            users, start + phase.start_s, start + phase.end_s, service_ms * users, worker="gen:1"
        )
    return samples


def cpu_readings(schedule: LadderSchedule, start: float) -> list[CpuReading]:
    """The load generator's CPU, a steady 5 %, read every second."""
    seconds = math.ceil(schedule.duration_s) + 1
    return [CpuReading("gen:1", start + t, 0.05 * t) for t in range(seconds)]


def held_points(schedule: LadderSchedule, start: float) -> list[MetricPoint]:
    """ConcurrentRequestsPerModel's 10 s Maximum: the users held, in every period of a hold."""
    points = []
    for index, users in enumerate(schedule.rungs):
        phase = schedule.rung_phase(index)
        first = math.ceil((start + phase.start_s) / 10) * 10
        for ts in range(int(first), int(start + phase.end_s) - 9, 10):
            points.append(MetricPoint(float(ts), float(users)))
    return points


def minute_points(samples: list[Sample], start: float, end: float) -> list[MetricPoint]:
    """InvocationsPerInstance's minute Sum on one instance: the requests that arrived in each
    whole minute of [start, end]."""
    first = math.ceil(start / 60) * 60
    return [
        MetricPoint(float(ts), float(sum(1 for s in samples if ts <= s.start < ts + 60)))
        for ts in range(int(first), int(end) - 59, 60)
    ]


def write_ladder(
    folder: Path,
    fingerprint: Fingerprint,
    kind: ProvenanceKind,
    *,
    rungs: tuple[int, ...] = (1, 20, 30, 40, 50, 60),
    service_ms: float = 100.0,
    slo_ms: float = 3000.0,
    hold_s: float = 70.0,
    measure_s: float = 60.0,
    surge_ratio: float = 1.25,
    confidence: float | None = None,
) -> Path:
    """The ladder (and, on a SageMaker transport, its CloudWatch join and verification rungs);
    with `confidence`, each rung's p95 interval at that level (issue 38)."""
    schedule = LadderSchedule(rungs=rungs, hold_s=hold_s, measure_s=measure_s, idle_s=10.0)
    samples = serial_samples(schedule, START_EPOCH, service_ms)
    cpu = cpu_readings(schedule, START_EPOCH)
    found = ladder_rungs(
        samples, cpu, schedule, START_EPOCH, slo_ms, math.inf, confidence=confidence
    )
    provenance = Provenance.now(kind, "synthetic serial engine (tests/measured_set.py)")
    artifact = build_qmax_artifact(
        found, fingerprint, schedule, slo_ms, provenance, START_EPOCH, confidence=confidence
    )
    raw = QmaxRaw.of(fingerprint, cpu)
    if not fingerprint.transport.is_local:
        artifact, samples, raw = _join(
            artifact, schedule, samples, raw, slo_ms, surge_ratio, service_ms
        )
    path = write_artifact(artifact, folder, qmax_filename(fingerprint, kind))
    write_samples(samples_path(path), samples)
    write_raw(raw_path(path), raw)
    return path


def _join(
    artifact: QmaxArtifact,
    schedule: LadderSchedule,
    samples: list[Sample],
    raw: QmaxRaw,
    slo_ms: float,
    surge_ratio: float,
    service_ms: float,
) -> tuple[QmaxArtifact, list[Sample], QmaxRaw]:
    """CloudWatch's ratios, and the verification rungs a live ladder holds after it."""
    levels = all_levels(artifact.curve_rungs, artifact.refined_q_max or 1, surge_ratio)
    from_ladder = held_by_the_ladder(levels, artifact.rungs, artifact.ladder)
    rest = tuple(level for level in levels if level.users not in from_ladder)
    held_run = None
    points = held_points(schedule, START_EPOCH)
    cpu = raw.cpu_readings()
    end = START_EPOCH + schedule.duration_s
    if rest:
        verify = verification_ladder(schedule, rest)
        held_start = START_EPOCH + schedule.duration_s + 30.0
        samples = samples + serial_samples(verify, held_start, service_ms)
        cpu = cpu + cpu_readings(verify, held_start)
        points = points + held_points(verify, held_start)
        held = ladder_rungs(samples, cpu, verify, held_start, slo_ms, math.inf)
        held_run = (verify.settings(held_start), held)
        end = held_start + verify.duration_s
    minutes = minute_points(samples, START_EPOCH, end)
    joined = invocation_ratios_for(ratios_for(artifact, points), minutes, samples)
    verification = verification_from_runs(
        levels, surge_ratio, from_ladder, (joined.ladder, joined.rungs), held_run, points,
        minutes, samples,
    )  # fmt: skip
    joined = joined.model_copy(
        update={
            "verification": verification,
            "verification_ladder": held_run[0] if held_run else None,
        }
    )
    joined = QmaxArtifact.model_validate(joined.model_dump(mode="json"))
    raw = QmaxRaw.of(raw.fingerprint, cpu).with_reads(
        LADDER_RATIO_STAT, [(p.ts, p.value) for p in points]
    )
    raw = raw.with_reads(INVOCATIONS_RATIO_STAT, [(p.ts, p.value) for p in minutes])
    return joined, samples, raw


def write_ttotal(
    folder: Path, qmax_path: Path, fingerprint: Fingerprint, kind: ProvenanceKind,
    *, total_s: float = 260.2, lag_s: float = 60.0,
) -> Path:  # fmt: skip
    """A forced scale-out's timestamps, each stage a share of `total_s`."""
    t0 = START_EPOCH + 10_000.0
    shares = (0.55, 0.03, 0.01, 0.1, 0.08, 0.15, 0.04, 0.04)
    stamps = [t0]
    for share in shares:
        stamps.append(stamps[-1] + share * total_s)
    markers = dict(
        zip(("container_started", "framework_init", "weights_fetched", "weights_ready",
             "warmup_done"), stamps[2:7], strict=True)
    )  # fmt: skip
    events = scale_out_events(
        t0 - 30.0, stamps[0], stamps[1], markers, stamps[7], stamps[8], emulated=kind == "emulated"
    )
    stages = stages_from_events(events)
    total = measured_total_s(stages)
    ttotal = TtotalArtifact(
        fingerprint=fingerprint,
        trigger=Trigger.FORCE_DESIRED,
        stages=stages,
        measured_total_s=total,
        policy_lag_bound_s=lag_s,
        planned_total_s=total + lag_s,
        recovery_rule="synthetic",
        qmax_sha256=sha256_file(qmax_path),
        provenance=Provenance.now(kind, "synthetic scale-out (tests/measured_set.py)"),
        events=events,
    )
    name = ttotal_filename(fingerprint, Trigger.FORCE_DESIRED.value, kind)
    return write_artifact(ttotal, folder, name)


def measured_set(
    folder: Path,
    fingerprint: Fingerprint = EMULATED_FINGERPRINT,
    kind: ProvenanceKind = "emulated",
    request: PlanRequest | None = None,
) -> MeasuredSet:
    """Ladder, T_total and plan in `folder` (made if missing), each from its raw data."""
    folder.mkdir(parents=True, exist_ok=True)
    qmax = write_ladder(folder, fingerprint, kind)
    ttotal = write_ttotal(folder, qmax, fingerprint, kind)
    request = request or PlanRequest(peak_rps=5000, trough_rps=5, rule="published")
    written = plan_from_files(qmax, ttotal, request, folder)
    return MeasuredSet(qmax, ttotal, written.path)
