"""The closed-loop Q_max ladder's statistics as pure arithmetic: each rung and the artifact.

The schedule (`schedule`) says where each rung's measure window lies; the statistics turn raw
samples (`samples.Sample`) into the foundation's `Rung` and `QmaxArtifact`; nothing here touches
the network or Locust.

Rules (SPEC §4):
- A rung's latency figures come from the requests of that rung that *ended* inside its window;
  achieved rps is the successful ones over the window's length.
- Client mean in-flight is the time-average, over the window, of the requests outstanding
  (every request interval overlapping the window counts for its overlap, cancelled ones too).
- Client-bound (unusable, not a pass): mean in-flight below 95 % of N, or a load-generating
  process above 90 % CPU during the window.
- The SLO is met when p95 TTFAB is at or under it and at most 1 % of the window's requests
  failed (a failed request has no TTFAB to hide behind).
- Percentiles are numpy's default (linear interpolation between closest ranks).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import (
    QmaxArtifact,
    QmaxBasis,
    QmaxRepeats,
    Refinement,
    RefinementProbe,
    ladder_outcome,
    q_max_interval_of,
    q_max_on_basis,
)
from tts_bench.artifacts.rungs import (
    P95Interval,
    Rung,
    RungVerdict,
    UncontendedService,
    rung_meets_slo,
    rung_verdict,
)
from tts_bench.measure.ladder.quantile_interval import quantile_interval
from tts_bench.measure.ladder.refine import coarse_bracket, narrow
from tts_bench.measure.ladder.schedule import LadderError, LadderSchedule
from tts_bench.measure.ladder.stability import Stability, next_hold, stability
from tts_bench.measure.playback import PlaybackFigures, playback_figures
from tts_bench.measure.samples import Outcome, Sample, mean_in_flight, percentile

MIN_IN_FLIGHT_FRACTION = 0.95  # below this share of N the client did not hold the rung
MAX_CLIENT_CPU_PERCENT = 90.0  # above this a load generator's own timing is suspect


@dataclass(frozen=True, slots=True)
class CpuReading:
    """Cumulative CPU seconds (user + system) of one load-generating process at `ts`."""

    worker: str
    ts: float
    cpu_s: float


def client_cpu_percent(readings: Iterable[CpuReading], w0: float, w1: float) -> float | None:
    """The busiest process's CPU share over the window, from the readings nearest its ends.

    None when no process has readings spanning at least half the window.
    """
    by_worker: dict[str, list[CpuReading]] = defaultdict(list)
    for r in readings:
        by_worker[r.worker].append(r)
    worst: float | None = None
    for series in by_worker.values():
        first = min(series, key=lambda r: abs(r.ts - w0))
        last = min(series, key=lambda r: abs(r.ts - w1))
        span = last.ts - first.ts
        if span < 0.5 * (w1 - w0):
            continue
        share = 100.0 * (last.cpu_s - first.cpu_s) / span
        worst = share if worst is None else max(worst, share)
    return worst


def in_window(samples: Iterable[Sample], concurrency: int, w0: float, w1: float) -> list[Sample]:
    """The rung's finished requests (not cancelled) that ended inside [w0, w1)."""
    return [
        s
        for s in samples
        if s.rung == concurrency and w0 <= s.end < w1 and s.outcome is not Outcome.CANCELLED
    ]


def window_stability(
    samples: Sequence[Sample], concurrency: int, window: tuple[float, float]
) -> Stability:
    """The stability verdict over the rung's requests that ended inside `window` (epoch)."""
    return stability(in_window(samples, concurrency, *window), window)


@dataclass(frozen=True, slots=True)
class VerdictRule:
    """What a held rung's interval verdict is judged by (`--slo-ms`, `--confidence`), so an
    undecided rung can be held longer (issue 38)."""

    slo_ms: float
    confidence: float
    underrun_slo_share: float | None = None

    def undecided(
        self, samples: Sequence[Sample], concurrency: int, window: tuple[float, float]
    ) -> bool:
        rung = rung_from_window(
            samples, concurrency, window, self.slo_ms, self.underrun_slo_share, None,
            self.confidence,
        )  # fmt: skip
        return rung.verdict == "undecided"


def extend_unstable(
    schedule: LadderSchedule,
    index: int,
    samples: Sequence[Sample],
    start_epoch: float,
    rule: VerdictRule | None = None,
) -> LadderSchedule | None:
    """Once rung `index`'s window has closed: the schedule with its hold one step longer when
    that window is unstable (or, with `rule`, steady but undecided) and `max_hold_s` leaves
    room; None when its hold is final.

    The samples need only be those that ended by the window's end: the verdict reads no other.
    """
    w0, w1 = (start_epoch + s for s in schedule.window_s(index))
    concurrency = schedule.rungs[index]
    steady = window_stability(samples, concurrency, (w0, w1)).stable
    undecided = rule is not None and steady and rule.undecided(samples, concurrency, (w0, w1))
    step = next_hold(
        schedule.rung_hold_s(index), schedule.measure_s, schedule.unstable_cap_s, steady, undecided,
        schedule.widening_s(index) > 0,
    )  # fmt: skip
    return None if step is None else schedule.extended(index, step.seconds, step.widen)


def rung_statistics(
    samples: Sequence[Sample],
    cpu: Sequence[CpuReading],
    concurrency: int,
    window: tuple[float, float],
    slo_ms: float,
    underrun_slo_share: float | None = None,
    confidence: float | None = None,
) -> Rung:
    """One `Rung` from the raw samples of the whole run, the load generators' CPU readings and
    the window's epoch bounds.

    With `underrun_slo_share`, a rung whose share of stalled streams exceeds it fails too; with
    `confidence`, the rung carries its p95's interval at that level and the verdict on it.
    """
    cpu_percent = client_cpu_percent(cpu, *window)
    return rung_from_window(
        samples, concurrency, window, slo_ms, underrun_slo_share, cpu_percent, confidence
    )


def p95_interval(
    ok: Sequence[Sample],
    failed: int,
    completed: int,
    slo_ms: float,
    underrun_share: float | None,
    underrun_slo_share: float | None,
    confidence: float | None,
) -> tuple[P95Interval | None, RungVerdict | None]:
    """The window's p95 TTFAB interval at `confidence` and the verdict on it; neither without
    a level (a ladder that predates them)."""
    if confidence is None:
        return None, None
    # in the order the requests ended: neighbours' dependence is what n_eff measures
    in_order = sorted(ok, key=lambda s: (s.end, s.start, s.worker))
    found = quantile_interval(
        [s.ttfab_ms for s in in_order if s.ttfab_ms is not None], 0.95, confidence
    )
    interval = P95Interval(
        level=confidence, samples=found.samples,
        effective_samples=round(found.effective_samples, 3), lower_ms=found.lower,
        upper_ms=found.upper,
    )  # fmt: skip
    verdict = rung_verdict(
        interval.lower_ms, interval.upper_ms, failed, completed, slo_ms, underrun_share,
        underrun_slo_share,
    )  # fmt: skip
    return interval, verdict


def rung_from_window(
    samples: Sequence[Sample],
    concurrency: int,
    window: tuple[float, float],
    slo_ms: float,
    underrun_slo_share: float | None,
    cpu_percent: float | None,
    confidence: float | None = None,
) -> Rung:
    """`rung_statistics` with the busiest load generator's CPU share already known (an artifact
    whose CPU readings were not kept is checked against the share it recorded)."""
    w0, w1 = window
    done = in_window(samples, concurrency, w0, w1)
    ok = [s for s in done if s.outcome is Outcome.OK]
    rejected = sum(1 for s in done if s.outcome is Outcome.REJECTED)
    errors = sum(1 for s in done if s.outcome is Outcome.ERROR)
    ttfab = [s.ttfab_ms for s in ok if s.ttfab_ms is not None]
    server_first = [s.server_first_chunk_ms for s in ok if s.server_first_chunk_ms is not None]
    latency = [s.latency_ms for s in ok]
    in_flight = mean_in_flight(samples, w0, w1)

    p95 = percentile(ttfab, 95) if ttfab else None
    failed = rejected + errors
    heard = playback_figures(ok)
    meets = rung_meets_slo(p95, failed, len(done), slo_ms, heard.underrun_share, underrun_slo_share)
    reasons = []
    # A rung the server failed by refusing is judged whatever the client held: its refused
    # users were waiting out their backoff (`backoff`), which the server asked for.
    refused_it = rejected > 0 and not meets
    if in_flight < MIN_IN_FLIGHT_FRACTION * concurrency and not refused_it:
        reasons.append(
            f"client held {in_flight:.2f} in flight, "
            f"below {MIN_IN_FLIGHT_FRACTION:.0%} of {concurrency}"
        )
    if cpu_percent is not None and cpu_percent > MAX_CLIENT_CPU_PERCENT:
        reasons.append(
            f"load generator at {cpu_percent:.0f} % CPU (over {MAX_CLIENT_CPU_PERCENT:.0f} %)"
        )
    if not done:
        reasons.append("no request finished inside the measure window")
    steady = window_stability(samples, concurrency, window)
    interval, verdict = p95_interval(
        ok, failed, len(done), slo_ms, heard.underrun_share, underrun_slo_share, confidence
    )
    return Rung(
        concurrency=concurrency,
        achieved_rps=len(ok) / (w1 - w0),
        ttfab_p50_ms=percentile(ttfab, 50) if ttfab else None,
        ttfab_p95_ms=p95,
        ttfab_p99_ms=percentile(ttfab, 99) if ttfab else None,
        latency_mean_ms=float(np.mean(latency)) if latency else None,
        latency_p95_ms=percentile(latency, 95) if latency else None,
        completed=len(done),
        ok=len(ok),
        rejected=rejected,
        errors=errors,
        client_mean_in_flight=in_flight,
        cloudwatch_ratio=None,
        meets_slo=meets,
        usable=not reasons,
        unusable_reason="; ".join(reasons) or None,
        client_cpu_percent=cpu_percent,
        server_first_chunk_p95_ms=percentile(server_first, 95) if server_first else None,
        rtf_p50=heard.rtf_p50,
        rtf_p95=heard.rtf_p95,
        underrun_share=heard.underrun_share,
        stall_ms_p95=heard.stall_ms_p95,
        sub_window_ttfab_p95_ms=list(steady.sub_window_p95_ms),
        stable=steady.stable,
        ttfab_p95_interval=interval,
        verdict=verdict,
    )


def ladder_rungs(
    samples: Sequence[Sample],
    cpu: Sequence[CpuReading],
    schedule: LadderSchedule,
    start_epoch: float,
    slo_ms: float,
    now: float,
    underrun_slo_share: float | None = None,
    confidence: float | None = None,
) -> list[Rung]:
    """Rungs whose window closed by `now`, in order, up to and including the first that fails."""
    rungs: list[Rung] = []
    for i, concurrency in enumerate(schedule.rungs):
        w0, w1 = schedule.window_s(i)
        if start_epoch + w1 > now:
            break
        rung = rung_statistics(
            samples,
            cpu,
            concurrency,
            (start_epoch + w0, start_epoch + w1),
            slo_ms,
            underrun_slo_share,
            confidence,
        )
        rungs.append(rung)
        if not rung.passes:
            break
    return rungs


def uncontended_service(rungs: Sequence[Rung]) -> UncontendedService | None:
    """S and S_p95 (seconds) from the c=1 rung, when it was measured with successes."""
    first = next((r for r in rungs if r.concurrency == 1), None)
    if first is None or not first.latency_mean_ms or not first.latency_p95_ms:
        return None
    return UncontendedService(mean=first.latency_mean_ms / 1000, p95=first.latency_p95_ms / 1000)


def build_qmax_artifact(
    rungs: list[Rung],
    fingerprint: Fingerprint,
    schedule: LadderSchedule,
    slo_ms: float,
    provenance: Provenance,
    start_epoch: float | None = None,
    underrun_slo_share: float | None = None,
    refinement: Refinement | None = None,
    confidence: float | None = None,
    repeats: QmaxRepeats | None = None,
    q_max_basis: QmaxBasis | None = None,
) -> QmaxArtifact:
    _, bracketed = ladder_outcome(rungs)
    # A rung cut short after the first failure has no record: neither has its extension.
    settings = schedule.settings(start_epoch).model_copy(
        update={
            "underrun_slo_share": underrun_slo_share,
            "extended_s": list(schedule.extended_s[: len(rungs)]),
            "widened_s": list(schedule.widened_s[: len(rungs)]),
            "confidence": confidence,
        }
    )
    probes = [p.rung for p in refinement.probes] if refinement else []
    judged = sorted([*rungs, *probes], key=lambda r: r.concurrency)
    interval = None if confidence is None else q_max_interval_of(judged, confidence)
    basis = None if confidence is None else q_max_basis
    return QmaxArtifact(
        fingerprint=fingerprint,
        slo_ms=slo_ms,
        q_max=q_max_on_basis(basis, rungs, interval, repeats),
        q_max_basis=basis,
        bracketed=bracketed,
        uncontended_service_s=uncontended_service(rungs),
        rungs=rungs,
        ladder=settings,
        refinement=refinement,
        q_max_interval=interval,
        repeats=repeats,
        provenance=provenance,
    )


def build_refinement(
    coarse: Sequence[Rung], probes: Sequence[RefinementProbe], pct: float, ended_by: str
) -> Refinement:
    """The refinement record: probes in the order held, the bracket they leave.

    Replays `refine.narrow` over the probes from the coarse bracket, so the recorded Q_max
    is the bisection's own (the artifact's validator checks it is the highest pass).
    """
    bracket = coarse_bracket(coarse)
    if bracket is None:
        raise LadderError("only a bracketed ladder can be refined")
    for probe in probes:
        if not probe.rung.usable or probe.rung.verdict == "undecided":
            break
        bracket = narrow(bracket, probe.rung.concurrency, probe.rung.meets_slo)
    return Refinement(
        resolution_pct=pct,
        probes=list(probes),
        q_max=bracket.lo,
        failing_above=bracket.hi,
        q_max_resolution=bracket.gap,
        ended_by=ended_by,  # type: ignore[arg-type]
    )


@dataclass(frozen=True, slots=True)
class LiveFigures:
    """What the progress line shows for the rung being held."""

    finished: int
    ttfab_p95_ms: float | None
    in_flight: float
    playback: PlaybackFigures


def live_figures(
    samples: Sequence[Sample],
    open_starts: Sequence[float],
    concurrency: int,
    since: float,
    now: float,
) -> LiveFigures:
    """The held rung over [since, now): requests still open count as in flight until `now`."""
    recent = [s for s in samples if s.rung == concurrency and since <= s.end < now]
    ok = [s for s in recent if s.outcome is Outcome.OK]
    ttfab = [s.ttfab_ms for s in ok if s.ttfab_ms is not None]
    in_flight = 0.0
    if now > since:
        busy = sum(max(0.0, now - max(start, since)) for start in open_starts)
        in_flight = mean_in_flight(samples, since, now) + busy / (now - since)
    return LiveFigures(
        finished=len(recent),
        ttfab_p95_ms=percentile(ttfab, 95) if ttfab else None,
        in_flight=in_flight,
        playback=playback_figures(ok),
    )
