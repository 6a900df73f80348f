"""The main job: the whole chain on this machine, against a target that is started for it.

One job, two targets that differ only where the target differs (`Target`): a local server
process (`local_run.LocalServerTarget`, `tts-bench local-run --in-process`) or the local cloud,
a SageMaker endpoint of local container processes behind real AWS clients
(`local_cloud_run.LocalCloudTarget`, the default). The job:

1. starts the target (and stops it whatever happens);
2. states a local SLO: a CPU serves Kokoro tens of times slower than the GPU the production SLO
   is meant for, so unless `--slo-ms` is given the SLO is calibrated on the target's own
   uncontended requests, measured first: a fixed multiple of their p95 TTFAB, which a short
   ladder brackets within a few rungs (the engine shares the CPU, so TTFAB grows with N), raised
   where needed to leave the queueing headroom the plan judges it by (`planning.slo_headroom`);
   a busy machine whose one request needs an SLO past 60 s is refused before the ladder. The
   same calibration stretches the ladder's windows when this machine serves slower;
3. runs the short ladder and writes the qmax artifact;
4. measures T_total (a fresh process beside the loaded one, or one more instance forced);
5. plans over the pair, and on the local cloud deploys the plan and validates what was deployed;
6. checks the surge model against open-loop arrivals on an instance bounded at Q_max;
7. draws the plots and writes the run's HTML report (`report`);
8. on the local cloud, rehearses the plan it made on curve instances from its own ladder
   (`short_rehearsal`) and says in one line whether the policy scaled out before shedding.

The folder it writes into stays a consistent set: an artifact there made from a file the run
replaced (a plan of the ladder measured before) is removed (`custody.stale`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from tts_bench.artifacts.companions import json_digests
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact, QmaxBasis
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.aws.validate import Comparison
from tts_bench.custody.stale import retire_replaced
from tts_bench.errors import TtsBenchError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ladder.schedule import LadderSchedule, format_duration
from tts_bench.measure.ttotal.probe import ProbeSample
from tts_bench.planning.from_files import WrittenPlan, plan_from_files
from tts_bench.planning.plan import PlanRequest
from tts_bench.planning.report import render_plan
from tts_bench.planning.slo_headroom import (
    headroom_feasible,
    queueing_headroom_s,
    slo_with_headroom_ms,
)

SLO_MULTIPLE = 3.0
CALIBRATION_REQUESTS = 4
MAX_LOCAL_SLO_MS = 59_000.0  # under SageMaker's 60 s invocation ceiling, or the plan stops
MIN_REQUESTS_PER_WINDOW = 3
LOCAL_PEAK_RPS = 1.0  # illustrative local traffic for the plan's fleet size
LOCAL_TROUGH_RPS = 0.2

Say = Callable[[str], None]


class MainJobError(TtsBenchError):
    """A step of the main job failed; the message names the step."""


@dataclass(frozen=True, slots=True)
class JobSettings:
    out: Path
    schedule: LadderSchedule
    corpus_path: Path
    utterances: Sequence[Utterance]
    slo_ms: float | None  # None: calibrate
    peak_rps: float = LOCAL_PEAK_RPS
    trough_rps: float = LOCAL_TROUGH_RPS
    model: str = "kokoro-82m"
    stretch_windows: bool = False  # longer windows when this machine serves slower
    surge_s: float | None = None  # seconds per surge rate; None: `local_surge_duration_s`
    # The point Q_max (issue 38): a CPU rung here finishes 5-14 requests, and the p95's 95 %
    # interval has an upper end only from 72, so no rung could pass on it. The plan made from
    # it records the basis, and the gate lets such a plan scale only a local image.
    q_max_basis: QmaxBasis = "point"


class Target(Protocol):
    """Where the chain runs; the job's steps call it in order, inside `running`."""

    where: str  # what the final report names: the endpoint, or the server's URL
    stopped: str  # the step line once it is stopped
    uncontended: str  # whose uncontended TTFAB calibrates the SLO
    surge_ratio: float | None  # the plan's, when the target's configuration sets one
    deploys: bool  # whether a feasible plan is deployed and validated
    rehearses: bool  # whether its ladder can stand behind curve instances (a SageMaker build)

    def running(self, step: Say) -> contextlib.AbstractContextManager[None]: ...

    def speak(self, utterance: Utterance) -> ProbeSample: ...

    def ladder(
        self, settings: JobSettings, schedule: LadderSchedule, slo_ms: float, step: Say
    ) -> Path: ...

    def ttotal(
        self, settings: JobSettings, qmax_path: Path, qmax: QmaxArtifact, step: Say
    ) -> tuple[TtotalArtifact, Path] | None: ...

    def deploy(self, written: WrittenPlan, step: Say) -> tuple[Comparison, ...]: ...

    def surge(
        self, settings: JobSettings, qmax_path: Path, validation: Sequence[Comparison], step: Say
    ) -> Path | None: ...


@dataclass(frozen=True, slots=True)
class JobResult:
    where: str
    qmax_path: Path
    ttotal_path: Path | None
    plan_path: Path | None
    plan_exit_code: int
    validation: tuple[Comparison, ...]
    pngs: tuple[Path, ...]
    slo_ms: float
    slo_reason: str
    q_max: int | None
    bracketed: bool
    measured_total_s: float | None
    elapsed_s: float
    surge_path: Path | None
    deploys: bool
    rehearsal: str | None = None  # the short rehearsal's one line
    page: Path | None = None  # the run's HTML report
    q_max_basis: str | None = None  # the ladder's (issue 38); None: it predates the choice

    @property
    def validated(self) -> bool:
        return bool(self.validation) and all(c.ok for c in self.validation)

    @property
    def exit_code(self) -> int:
        """0 for a plan, feasible or not, that reached the target as planned; else why not."""
        if self.deploys and self.plan_exit_code == 0 and not self.validated:
            return 1
        return 0 if self.plan_exit_code in (0, 1) else self.plan_exit_code


def calibrated_slo_ms(ttfab_ms: Sequence[float], latency_ms: Sequence[float]) -> float:
    """The local SLO from the uncontended requests: SLO_MULTIPLE × their p95 TTFAB, or, where
    that is less, the smallest SLO whose W_max covers one of them end to end (`slo_headroom`,
    the definition `plan` judges it by). Rounded up to 100 ms.

    Past SageMaker's ceiling it is refused here, before any rung: this machine then serves one
    request too slowly for any SLO the plan could accept."""
    service_p95_s = float(np.percentile(latency_ms, 95)) / 1000
    needed_ms = slo_with_headroom_ms(service_p95_s)
    if needed_ms > MAX_LOCAL_SLO_MS:
        raise MainJobError(
            f"calibration: one uncontended request takes {service_p95_s * 1000:.0f} ms p95 end to "
            f"end here, so a local SLO the plan accepts needs {needed_ms:.0f} ms, past "
            f"SageMaker's 60 s invocation ceiling; free the machine's CPUs or give a --corpus "
            "of shorter lines"
        )
    # The TTFAB multiple only places the knee where a short ladder brackets it: capped, not refused.
    return max(min(calibrated_ttfab_ms(ttfab_ms), MAX_LOCAL_SLO_MS), needed_ms)


def calibration_reason(ttfab_ms: Sequence[float], latency_ms: Sequence[float], who: str) -> str:
    """Which of the two calibrated bounds set the SLO, with both p95s."""
    ttfab_p95, latency_p95 = np.percentile(ttfab_ms, 95), np.percentile(latency_ms, 95)
    by_ttfab = f"{SLO_MULTIPLE:g} × {who} uncontended p95 TTFAB ({ttfab_p95:.0f} ms)"
    headroom = f"W_max ≥ S_p95 over {who} uncontended p95 latency ({latency_p95:.0f} ms)"
    if slo_with_headroom_ms(latency_p95 / 1000) > calibrated_ttfab_ms(ttfab_ms):
        first, then = headroom, f"more than {by_ttfab}"
    else:
        first, then = by_ttfab, f"which leaves {headroom}"
    return f"{first}, {then}; {len(ttfab_ms)} requests, rounded up"


def calibrated_ttfab_ms(ttfab_ms: Sequence[float]) -> float:
    """SLO_MULTIPLE × the uncontended p95 TTFAB, rounded up to 100 ms."""
    return math.ceil(SLO_MULTIPLE * float(np.percentile(ttfab_ms, 95)) / 100.0) * 100.0


def refused_slo(slo_ms: float, latency_ms: Sequence[float]) -> str | None:
    """Why a given SLO cannot be planned for on this machine (one uncontended request already
    misses it: W_max ≤ 0), or None."""
    service_p95_s = float(np.percentile(latency_ms, 95)) / 1000
    w_max_s = queueing_headroom_s(slo_ms, service_p95_s)
    if headroom_feasible(w_max_s):
        return None
    return (
        f"--slo-ms {slo_ms:g}: one uncontended request takes {service_p95_s * 1000:.0f} ms p95 "
        f"end to end here, so W_max = SLO − S_p95 = {w_max_s:.3f} s and the plan would stop; "
        f"give --slo-ms {slo_with_headroom_ms(service_p95_s):.0f} or more, or leave it out to "
        "calibrate"
    )


def calibrate(
    speak: Callable[[Utterance], ProbeSample], utterances: Sequence[Utterance], step: Say
) -> list[ProbeSample]:
    """A few one-at-a-time requests spread over the corpus."""
    stride = max(1, len(utterances) // CALIBRATION_REQUESTS)
    out = []
    for i in range(CALIBRATION_REQUESTS):
        sample = speak(utterances[(i * stride) % len(utterances)])
        if sample.ttfab_ms is None or sample.latency_ms is None:
            raise MainJobError(f"calibration request {i + 1} failed: {sample.detail}")
        out.append(sample)
        step(
            f"calibration {i + 1}/{CALIBRATION_REQUESTS}: TTFAB {sample.ttfab_ms:.0f} ms, "
            f"latency {sample.latency_ms:.0f} ms"
        )
    return out


def stretched(schedule: LadderSchedule, latency_ms: Sequence[float]) -> LadderSchedule:
    """The schedule with each window long enough for a few requests at c=1 on this machine
    (a loaded machine serves slower; a window that no request finishes measures nothing)."""
    measure_s = max(schedule.measure_s, MIN_REQUESTS_PER_WINDOW * max(latency_ms) / 1000)
    hold_s = max(schedule.hold_s, measure_s + (schedule.hold_s - schedule.measure_s))
    return replace(schedule, hold_s=round(hold_s), measure_s=round(measure_s))


@dataclass(frozen=True, slots=True)
class LocalSlo:
    slo_ms: float
    reason: str
    schedule: LadderSchedule


def local_slo(settings: JobSettings, target: Target, step: Say) -> LocalSlo:
    """The SLO (given, or calibrated on the target) and the ladder's schedule for it."""
    needed = settings.slo_ms is None or settings.stretch_windows
    calibration = calibrate(target.speak, settings.utterances, step) if needed else []
    latency = [s.latency_ms for s in calibration if s.latency_ms is not None]
    if settings.slo_ms is not None:
        slo_ms, reason = settings.slo_ms, "given with --slo-ms"
        if latency and (why := refused_slo(slo_ms, latency)) is not None:
            raise MainJobError(why)
    else:
        ttfab = [s.ttfab_ms for s in calibration if s.ttfab_ms is not None]
        slo_ms = calibrated_slo_ms(ttfab, latency)
        reason = calibration_reason(ttfab, latency, target.uncontended)
    step(f"local SLO: p95 TTFAB <= {slo_ms:g} ms ({reason})")
    schedule = settings.schedule
    if settings.stretch_windows:
        schedule = stretched(schedule, [s.latency_ms or 0.0 for s in calibration])
    return LocalSlo(slo_ms, reason, schedule)


def plan_step(
    settings: JobSettings,
    target: Target,
    paths: tuple[Path, Path],
    slo_ms: float,
    step: Say,
    say: Say,
) -> tuple[Path | None, int, tuple[Comparison, ...]]:
    """plan over the pair; a feasible plan is deployed and validated where the target deploys.
    A refused plan is reported: the artifacts above it stay."""
    ratio = {} if target.surge_ratio is None else {"surge_ratio": target.surge_ratio}
    request = PlanRequest(
        peak_rps=settings.peak_rps, trough_rps=settings.trough_rps, slo_ms=slo_ms, **ratio
    )
    step("plan:")
    try:
        written = plan_from_files(*paths, request, settings.out)
    except TtsBenchError as exc:
        step(f"plan refused: {exc}")
        return None, exc.exit_code, ()
    say(render_plan(written.plan, written.qmax, written.ttotal))
    step(f"plan written: {written.path}")
    if not written.plan.feasible:
        if target.deploys:
            step("no redeploy: the plan is infeasible, so the stack would deploy no scaling")
        return written.path, 1, ()
    return written.path, 0, target.deploy(written, step) if target.deploys else ()


@contextlib.contextmanager
def step_clock(say: Say) -> Iterator[Say]:
    """Each line prefixed with the time since the job began."""
    began = time.time()
    yield lambda text: say(f"[{format_duration(time.time() - began):>10}] {text}")


def run_main_job(settings: JobSettings, target: Target, say: Say) -> JobResult:
    """The chain against `target`, started here and stopped whatever happens."""
    from tts_bench.report.build import write_report

    began = time.time()
    settings.out.mkdir(parents=True, exist_ok=True)
    # What the folder held before: an artifact made from a file this run replaces is removed,
    # so the folder stays a consistent set (`tts-bench verify` passes on it).
    before = json_digests(settings.out)
    with step_clock(say) as step:
        ttotal: tuple[TtotalArtifact, Path] | None = None
        plan_path, plan_code, validation = None, 2, ()
        with target.running(step):
            slo = local_slo(settings, target, step)
            qmax_path = target.ladder(settings, slo.schedule, slo.slo_ms, step)
            retire_replaced(before, settings.out, step)
            qmax = load_artifact(qmax_path, QmaxArtifact)
            outcome = "bracketed" if qmax.bracketed else "NOT bracketed"
            basis = f", {qmax.q_max_basis} value" if qmax.q_max_basis else ""
            step(f"Q_max {qmax.q_max} at {slo.slo_ms:g} ms ({outcome}{basis}): {qmax_path}")
            ttotal = target.ttotal(settings, qmax_path, qmax, step)
            if qmax.q_max is None or ttotal is None:
                step("plan skipped: no rung met the SLO, so there is no Q_max to plan from")
            else:
                plan_path, plan_code, validation = plan_step(
                    settings, target, (qmax_path, ttotal[1]), slo.slo_ms, step, say
                )
            surge_path = target.surge(settings, qmax_path, validation, step)
        retire_replaced(before, settings.out, step)
        step(target.stopped)
        rehearsal, rehearsal_path = None, None
        if target.rehearses and ttotal is not None and plan_path is not None and plan_code == 0:
            rehearsal, rehearsal_path = rehearsal_step(
                settings, qmax_path, ttotal[1], plan_path, step
            )
        ran = [qmax_path, ttotal and ttotal[1], plan_path, surge_path, rehearsal_path]
        report_page = settings.out / f"report-{qmax_path.stem.removeprefix('qmax-')}.html"
        written = write_report([p for p in ran if p is not None], report_page)
        pngs = list(written.pngs)
        step(f"plots: {', '.join(str(p) for p in pngs)}")
        step(f"report: {written.page}")
    return JobResult(
        where=target.where, qmax_path=qmax_path, ttotal_path=ttotal and ttotal[1],
        plan_path=plan_path, plan_exit_code=plan_code, validation=validation, pngs=tuple(pngs),
        slo_ms=slo.slo_ms, slo_reason=slo.reason, q_max=qmax.q_max, bracketed=qmax.bracketed,
        q_max_basis=qmax.q_max_basis,
        measured_total_s=ttotal and ttotal[0].measured_total_s, elapsed_s=time.time() - began,
        surge_path=surge_path, deploys=target.deploys, rehearsal=rehearsal, page=written.page,
    )  # fmt: skip


def rehearsal_step(
    settings: JobSettings, qmax_path: Path, ttotal_path: Path, plan_path: Path, step: Say
) -> tuple[str, Path | None]:
    """The plan rehearsed on curve instances of the job's ladder; its one line and artifact."""
    from tts_bench.jobs.short_rehearsal import short_rehearsal

    done = short_rehearsal(qmax_path, ttotal_path, plan_path, settings.out, step)
    step(f"{done.line} ({done.wall_s:.0f} s wall{f'; {done.path}' if done.path else ''})")
    return done.line, done.path


def report(result: JobResult) -> str:
    """The job's closing lines (stdout)."""
    q_max = "none (c=1 failed)" if result.q_max is None else str(result.q_max)
    total = (
        "not measured (no Q_max)"
        if result.measured_total_s is None
        else f"{result.measured_total_s:.1f} s measured"
    )
    feasible = {0: " (feasible)", 1: " (infeasible: see its findings)"}.get(
        result.plan_exit_code, ""
    )
    validated = (
        "all settings match the plan"
        if result.validated
        else ("not run" if not result.validation else "settings differ from the plan")
    )
    lines = [
        result.where,
        f"local SLO {result.slo_ms:g} ms ({result.slo_reason})",
        f"Q_max {q_max}, {'bracketed' if result.bracketed else 'NOT bracketed'}"
        + (f", {result.q_max_basis} value" if result.q_max_basis else ""),
        f"T_total {total}",
        f"plan: {result.plan_path or 'not written'}{feasible}",
        *([f"validate after the redeploy: {validated}"] if result.deploys else []),
        f"surge check: {result.surge_path or 'not run (see above)'}",
        *([result.rehearsal] if result.rehearsal else []),
        f"artifacts: {result.qmax_path}, {result.ttotal_path or '-'}",
        f"plots: {', '.join(map(str, result.pngs))}",
        f"report: {result.page or 'not written'}",
        f"runtime {result.elapsed_s / 60:.1f} min",
    ]
    return "\n".join(lines)
