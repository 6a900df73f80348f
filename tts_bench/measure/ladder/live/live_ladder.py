"""The live ladder on a SageMaker endpoint: preflight, freeze, Locust, CloudWatch join.

`run_live_ladder` is what `tts-bench qmax --endpoint` runs, from the CLI's main thread:
1. a preflight `drift` that refuses on any error (a leftover suspension, an orphan, ...);
2. `frozen_scaling` around the Locust run (scaling suspended, one instance pinned), restored
   on every exit path: a normal end, an exception, Ctrl-C, SIGTERM;
3. the fingerprint read from the endpoint itself (`sagemaker_target`), after the freeze;
4. once Q_max is known, still frozen, verification rungs where the plan's thresholds sit and at
   the fleet rule's level (`verification`), a Locust run of their own; the fleet level's hold
   spans whole minutes of InvocationsPerInstance on the cloud's clock;
5. per rung, `cloudwatch_ratio` from ConcurrentRequestsPerModel once CloudWatch has it, the
   verification rungs' ratios from the same read, and InvocationsPerInstance's ratio from its
   minute Sums against the client's requests sent in those minutes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT, LADDER_RATIO_STAT
from tts_bench.artifacts.files import load_artifact, write_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.qmax import DEFAULT_Q_MAX_BASIS, QmaxArtifact, QmaxBasis
from tts_bench.artifacts.rungs import VerificationRung
from tts_bench.aws.clock import ServiceClock
from tts_bench.aws.drift import read_and_check
from tts_bench.aws.freeze import frozen_scaling
from tts_bench.aws.session import AwsSession
from tts_bench.errors import RefusalError
from tts_bench.measure.ladder.live.cloudwatch_join import (
    DEFAULT_METRIC_WAIT_S,
    INVOCATIONS_KEY,
    MetricPoint,
    await_concurrency,
    await_minutes,
    cloud_window,
    invocation_ratios_for,
    ratios_for,
)
from tts_bench.measure.ladder.live.verification import (
    DEFAULT_PLAN_SURGE_RATIO,
    FLEET_HOLD_S,
    MIN_INVOCATION_MINUTES,
    VerificationLevel,
    all_levels,
    held_by_the_ladder,
    verification_from_runs,
    verification_ladder,
    verification_levels,
)
from tts_bench.measure.ladder.locust_child import LadderRequest, LadderRunError, run_ladder
from tts_bench.measure.ladder.quantile_interval import DEFAULT_CONFIDENCE
from tts_bench.measure.ladder.raw_record import QmaxRaw, raw_path, read_raw, write_raw
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target
from tts_bench.measure.samples import Sample, read_samples, samples_path, write_samples
from tts_bench.measure.transport.contract import load_contract

Log = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class LiveLadderRequest:
    endpoint: str
    variant: str
    transport: Transport
    schedule: LadderSchedule
    slo_ms: float
    model: str
    out: Path
    corpus: Path | None = None
    processes: int | None = None
    metric_wait_s: float = DEFAULT_METRIC_WAIT_S
    refine_pct: float | None = None
    underrun_slo: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    # The plan's surge ratio the verification rungs are held for; None holds none.
    plan_surge_ratio: float | None = DEFAULT_PLAN_SURGE_RATIO
    contract: str | None = None  # --contract as given; None: kokoro
    repeat: int = 1  # --repeat: bisections around the knee
    q_max_basis: QmaxBasis = DEFAULT_Q_MAX_BASIS  # --q-max-basis
    # --no-fleet-level: the verification holds the plan's threshold levels only.
    fleet_level: bool = True
    curve_check: bool = False  # --curve-check: a curve cloud's endpoint, knowingly

    @property
    def provenance_kind(self) -> str | None:
        """What the run's record is when the flags decide it (None: the endpoint decides)."""
        return "simulated" if self.curve_check else None


@dataclass(frozen=True, slots=True)
class HeldVerification:
    """The verification levels: those a ladder rung held already (users -> that rung's index
    in the ladder's artifact), and the artifact of the run that held the rest (None: none left)
    with that run's raw samples and CPU readings, kept beside the ladder's."""

    levels: tuple[VerificationLevel, ...]
    surge_ratio: float
    artifact: QmaxArtifact | None
    from_ladder: dict[int, int] = field(default_factory=dict)
    samples: tuple[Sample, ...] = ()
    raw: QmaxRaw | None = None


def preflight(session: AwsSession, endpoint: str, variant: str) -> None:
    """Refuse when `drift` finds an error on the endpoint (SPEC §4: drift always first)."""
    report = read_and_check(session, endpoint, variant=variant)
    if report.errors:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise RefusalError(
            f"preflight drift on {endpoint}: {first.rule.value}: {first.resource}: "
            f"{first.message}{more}; run `tts-bench drift --endpoint {endpoint}` and fix it first"
        )


def read_target(session: AwsSession, request: LiveLadderRequest) -> EndpointTarget:
    target = read_endpoint_target(
        session, request.endpoint, request.variant, request.transport, request.model
    )
    target.refuse_curve_check_mismatch(request.curve_check)
    target.refuse_not_in_service()
    target.refuse_bounded()
    # Named as the Locust side names it (`conductor.under_contract`): the artifact's file name.
    return target.under_contract(load_contract(request.contract).ref)


def run_live_ladder(
    session: AwsSession,
    request: LiveLadderRequest,
    progress: Log,
    log: Log,
    extra_args: Sequence[str] = (),
) -> Path:
    """Measure the ladder on the endpoint; returns the artifact path (ratios joined)."""
    if request.transport.is_local:
        raise RefusalError(f"--transport {request.transport.value} is a local transport")
    if request.plan_surge_ratio is not None:
        verification_levels(1, request.plan_surge_ratio)  # a bad ratio: refused before AWS
    preflight(session, request.endpoint, request.variant)
    read_target(session, request)  # refuse before anything changes
    args = ["--endpoint", request.endpoint, "--variant", request.variant]
    args += ["--region", session.region, *extra_args]
    with frozen_scaling(session, request.endpoint, request.variant, log=log):
        target = read_target(session, request)
        ladder = LadderRequest(
            host=session.endpoint_url("sagemaker-runtime"), schedule=request.schedule,
            slo_ms=request.slo_ms, transport=request.transport.value, corpus=request.corpus,
            model=request.model, out=request.out, processes=request.processes,
            refine_pct=request.refine_pct, underrun_slo=request.underrun_slo,
            confidence=request.confidence, contract=request.contract, repeat=request.repeat,
            q_max_basis=request.q_max_basis, curve_check=request.curve_check,
        )  # fmt: skip
        kind = request.provenance_kind or target.provenance_kind
        path = run_ladder(ladder, target.fingerprint, progress, args, kind)
        held = hold_verification(
            ladder, target, path, request.plan_surge_ratio, progress, args, log,
            fleet_level=request.fleet_level, kind=kind,
        )  # fmt: skip
    return join_cloudwatch(session, request, path, log, held)


def hold_verification(
    ladder: LadderRequest,
    target: EndpointTarget,
    path: Path,
    surge_ratio: float | None,
    progress: Log,
    args: Sequence[str],
    log: Log,
    fleet_level: bool = True,
    kind: str | None = None,
) -> HeldVerification | None:
    """Hold C_scale_max and C_scale_min for `surge_ratio` once the ladder found Q_max (SPEC §6),
    and the fleet rule's level unless `fleet_level` is off (`qmax --no-fleet-level`).

    A level a usable ladder rung held already is read from that rung's window; the rest are a
    run of their own, under the same freeze, into a scratch folder (its rungs are no ladder
    rungs). A failed run costs only its points (the plan then says which rule it used)."""
    # Whole minutes are the cloud's: on a compressed clock its three minutes pass sooner.
    clock = ServiceClock.from_environment()
    ladder_run = on_the_clock(load_artifact(path, QmaxArtifact), clock)
    q_max = ladder_run.refined_q_max
    if surge_ratio is None or q_max is None:
        if surge_ratio is not None:
            log("no verification rungs: the ladder found no Q_max")
        return None
    levels = (
        all_levels(ladder_run.curve_rungs, q_max, surge_ratio)
        if fleet_level
        else verification_levels(q_max, surge_ratio)
    )
    if not fleet_level:
        log("no verification at the fleet rule's level (--no-fleet-level)")
    log(
        "verification rungs for surge ratio "
        f"{surge_ratio:g}: " + ", ".join(f"{v.role} {v.at:g} -> {v.users} users" for v in levels)
    )
    from_ladder = held_by_the_ladder(levels, ladder_run.rungs, ladder_run.ladder)
    for users in sorted(from_ladder):
        log(f"verification at {users} users: the ladder's rung c={users} held it; read from there")
    to_hold = tuple(level for level in levels if level.users not in from_ladder)
    if not to_hold:
        return HeldVerification(levels, surge_ratio, None, from_ladder)
    fleet_hold_s = clock.wall_seconds(FLEET_HOLD_S)
    schedule = verification_ladder(ladder.schedule, to_hold, fleet_hold_s)
    if any(level.counts_invocations for level in to_hold):
        longest = max(schedule.rung_hold_s(i) for i in range(len(schedule.rungs)))
        log(
            f"verification holds the fleet rule's level until {MIN_INVOCATION_MINUTES} whole "
            f"minutes of InvocationsPerInstance are read there, at most {longest:g} s"
        )
    with tempfile.TemporaryDirectory(prefix="tts-bench-verification-") as scratch:
        run = replace(ladder, schedule=schedule, out=Path(scratch), refine_pct=None, repeat=1)
        try:
            held = run_ladder(
                run, target.fingerprint, lambda line: progress(f"verification {line}"), args,
                kind or target.provenance_kind,
            )  # fmt: skip
        except LadderRunError as exc:
            log(f"verification rungs not measured: {str(exc).splitlines()[0]}")
            return HeldVerification(levels, surge_ratio, None, from_ladder)
        return HeldVerification(
            levels, surge_ratio, load_artifact(held, QmaxArtifact), from_ladder,
            tuple(read_samples(samples_path(held))), read_raw(raw_path(held)),
        )  # fmt: skip


def join_cloudwatch(
    session: AwsSession,
    request: LiveLadderRequest,
    path: Path,
    log: Log,
    held: HeldVerification | None = None,
) -> Path:
    """Rewrite the artifact at `path` with each rung's `cloudwatch_ratio` and the verification
    rungs, from one read of the metric over both runs."""
    clock = ServiceClock.from_environment()
    artifact = on_the_clock(load_artifact(path, QmaxArtifact), clock)
    ladder = artifact.ladder
    if ladder is None or ladder.start_epoch is None:
        return path
    start = cloud_window(ladder, 0)[0]
    end = cloud_window(ladder, len(artifact.rungs) - 1)[1]
    if held is not None and held.artifact is not None:
        held = replace(held, artifact=on_the_clock(held.artifact, clock))
    held_run = held.artifact if held is not None else None
    if held_run is not None and held_run.ladder is not None and held_run.ladder.start_epoch:
        end = max(end, cloud_window(held_run.ladder, len(held_run.rungs) - 1)[1])
    points = await_concurrency(
        session, request.endpoint, request.variant, start, end,
        wait_s=request.metric_wait_s, log=log,
    )  # fmt: skip
    joined = ratios_for(artifact, points)
    # The fleet rule's metric: minute Sums from the first rung's hold to the last's end.
    minutes = await_minutes(
        session, request.endpoint, request.variant, ladder.start_epoch, end,
        wait_s=request.metric_wait_s, log=log,
    )  # fmt: skip
    samples = read_samples(samples_path(path))
    all_samples = [*samples, *held.samples] if held is not None else samples
    joined = invocation_ratios_for(joined, minutes, all_samples)
    for rung in joined.rungs:
        ratio = "-" if rung.cloudwatch_ratio is None else f"{rung.cloudwatch_ratio:.2f}"
        invocations = rung.cloudwatch_ratios.get(INVOCATIONS_KEY)
        counted = "-" if invocations is None else f"{invocations:.2f}"
        log(
            f"rung c={rung.concurrency}: CloudWatch/client in-flight ratio {ratio}, "
            f"invocations per instance / client requests {counted}"
        )
    raw = read_raw(raw_path(path)).with_reads(LADDER_RATIO_STAT, [(p.ts, p.value) for p in points])
    raw = raw.with_reads(INVOCATIONS_RATIO_STAT, [(p.ts, p.value) for p in minutes])
    if held is not None:
        verification = held_rungs(held, points, artifact, minutes, all_samples)
        for v in verification:
            ratios = ", ".join(f"{k} {r:.2f}" for k, r in v.cloudwatch_ratios.items())
            log(f"verification {v.role} at {v.concurrency} users: ratio {ratios}")
        if len(verification) < len(held.levels):
            log("a verification rung has no CloudWatch reading: the plan falls back to the rungs")
        fleet = any(level.counts_invocations for level in held.levels)
        if fleet and not any(INVOCATIONS_KEY in v.cloudwatch_ratios for v in verification):
            log(
                f"the fleet level read fewer than {MIN_INVOCATION_MINUTES} whole minutes of "
                "InvocationsPerInstance: its ratio is unmeasured unless a ladder rung's hold held them"
            )
        joined = joined.model_copy(
            update={
                "verification": [*joined.verification, *verification],
                "verification_ladder": held.artifact.ladder if held.artifact else None,
            }
        )
        joined = QmaxArtifact.model_validate(joined.model_dump(mode="json"))
        # The held run's raw data joins the ladder's: one file of each for the whole artifact.
        write_samples(samples_path(path), all_samples)
        held_cpu = held.raw.cpu if held.raw is not None else []
        raw = raw.model_copy(update={"cpu": [*raw.cpu, *held_cpu]})
    if not request.fleet_level:
        joined = joined.model_copy(update={"fleet_level_skipped": True})
    write_raw(raw_path(path), raw)
    return write_artifact(joined, path.parent, path.name)


def on_the_clock(artifact: QmaxArtifact, clock: ServiceClock) -> QmaxArtifact:
    """The artifact with the clock CloudWatch is read on recorded in its ladder settings."""
    if artifact.ladder is None or not clock.compressed:
        return artifact
    ladder = artifact.ladder.model_copy(
        update={"time_scale": clock.scale, "time_origin_s": clock.origin_s}
    )
    return artifact.model_copy(update={"ladder": ladder})


def held_rungs(
    held: HeldVerification,
    points: Sequence[MetricPoint],
    ladder_run: QmaxArtifact,
    minutes: Sequence[MetricPoint] = (),
    samples: Sequence[Sample] = (),
) -> list[VerificationRung]:
    """The verification rungs, each with CloudWatch's 10 s Maximum over its own window (and the
    fleet level's InvocationsPerInstance over its hold's whole minutes): the held run's rung, or
    the ladder's rung that held those users already."""
    held_run = None if held.artifact is None else (held.artifact.ladder, held.artifact.rungs)
    return verification_from_runs(
        held.levels, held.surge_ratio, held.from_ladder, (ladder_run.ladder, ladder_run.rungs),
        held_run, points, minutes, samples,
    )  # fmt: skip
