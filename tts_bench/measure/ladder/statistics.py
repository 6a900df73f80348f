"""The closed-loop Q_max ladder as pure arithmetic: its schedule, and each rung's statistics.

The schedule says how many users run at any second of the test (the Locust shape asks it),
where each rung's measure window lies (the trailing `measure_s` of its hold) and how long the
whole ladder takes (the dry run prints it). The statistics turn raw samples (`samples.Sample`)
into the foundation's `Rung` and `QmaxArtifact`; nothing here touches the network or Locust.

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

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.schema import (
    LadderSettings,
    P95Interval,
    Provenance,
    QmaxArtifact,
    Refinement,
    RefinementProbe,
    Rung,
    RungVerdict,
    UncontendedService,
    ladder_outcome,
    q_max_interval_of,
    rung_meets_slo,
    rung_verdict,
)
from tts_bench.errors import TtsBenchError
from tts_bench.measure.playback import PlaybackFigures, playback_figures
from tts_bench.measure.quantile_interval import quantile_interval
from tts_bench.measure.refine import coarse_bracket, narrow, worst_case_probes_for_ladder
from tts_bench.measure.samples import Outcome, Sample
from tts_bench.measure.stability import Stability, next_hold, stability

DEFAULT_RUNGS = (1, 5, 10, 20, 30, 40, 50, 60)
DEFAULT_HOLD_S = 240.0
DEFAULT_MEASURE_S = 60.0
DEFAULT_IDLE_S = 30.0
DEFAULT_SLO_MS = 3000.0
# Longest hold, measure window or idle a schedule may ask for: a day. Longer is a typo, and
# 1e308 s would overflow the schedule's clock arithmetic.
MAX_PHASE_S = 86_400.0
# Most rungs, and most users on one rung: each user is a Locust greenlet with its connection, and
# the schedule's arithmetic (every tick finds its phase) grows with the rungs. A default ladder
# has 8 rungs up to 60 users; the largest Q_max measured here (an H200) is 571.
MAX_RUNGS = 100
MAX_RUNG_USERS = 10_000

MIN_IN_FLIGHT_FRACTION = 0.95  # below this share of N the client did not hold the rung
MAX_CLIENT_CPU_PERCENT = 90.0  # above this a load generator's own timing is suspect
# After the last rung the users are gone; this long lets workers' last reports reach the master.
FINAL_DRAIN_S = 5.0


class LadderError(TtsBenchError):
    """Ladder settings that cannot describe a run (rungs, hold, window)."""


def parse_rungs(text: str) -> tuple[int, ...]:
    """`"1,5,10"` → (1, 5, 10); strictly ascending positive integers or a `LadderError`."""
    try:
        rungs = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise LadderError(
            f"--rungs {text!r}: expected comma-separated integers such as 1,5,10"
        ) from None
    if not rungs:
        raise LadderError("--rungs is empty: give at least one concurrency, e.g. 1,5,10")
    if any(r < 1 for r in rungs) or list(rungs) != sorted(set(rungs)):
        raise LadderError(
            f"--rungs {text!r}: concurrencies must be positive and strictly ascending"
        )
    return rungs


@dataclass(frozen=True, slots=True)
class Phase:
    """One stretch of the schedule: `users` users from `start_s` to `end_s` (test seconds)."""

    users: int
    start_s: float
    end_s: float
    rung: int | None  # the rung held in this phase; None while idle


@dataclass(frozen=True, slots=True)
class LadderSchedule:
    """Rungs held for `hold_s` each, measured over the trailing `measure_s`, `idle_s` apart.

    With `max_hold_s`, a rung whose window was unstable is held longer (`extended_s[i]`
    seconds, known only as the run goes: see `extend_unstable`); every later rung starts
    that much later. After the last rung the schedule idles for max(`idle_s`,
    `final_drain_s`) so the last requests and (in distributed runs) the workers' last reports
    are in before it ends.
    """

    rungs: tuple[int, ...] = DEFAULT_RUNGS
    hold_s: float = DEFAULT_HOLD_S
    measure_s: float = DEFAULT_MEASURE_S
    idle_s: float = DEFAULT_IDLE_S
    final_drain_s: float = FINAL_DRAIN_S
    max_hold_s: float | None = None
    extended_s: tuple[float, ...] = ()  # per rung index; a rung past its end is not extended
    # Per rung index: how far its window reaches back beyond `measure_s` (an undecided rung's
    # window widens as it is held longer; see `stability.next_hold`). At most its extension.
    widened_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if len(self.rungs) > MAX_RUNGS or max(self.rungs, default=0) > MAX_RUNG_USERS:
            raise LadderError(
                f"--rungs: {len(self.rungs)} rungs up to {max(self.rungs):,} users; at most "
                f"{MAX_RUNGS} rungs of at most {MAX_RUNG_USERS:,} users each"
            )
        if (
            not self.rungs
            or any(r < 1 for r in self.rungs)
            or list(self.rungs) != sorted(set(self.rungs))
        ):
            raise LadderError(f"rungs {list(self.rungs)}: need positive, strictly ascending levels")
        if not (self.hold_s > 0 and self.measure_s > 0):
            raise LadderError("--hold-s and --measure-s must be positive")
        if self.measure_s > self.hold_s:
            raise LadderError(
                f"--measure-s {self.measure_s:g} exceeds --hold-s {self.hold_s:g}: the window "
                "is the trailing part of the hold"
            )
        if self.idle_s < 0 or self.final_drain_s < 0:
            raise LadderError("--idle-s cannot be negative")
        for flag, seconds in (
            ("--hold-s", self.hold_s),
            ("--measure-s", self.measure_s),
            ("--idle-s", self.idle_s),
        ):
            if not seconds <= MAX_PHASE_S:  # also refuses nan
                raise LadderError(f"{flag} {seconds:g}: at most {MAX_PHASE_S:g} s (a day)")
        if self.max_hold_s is not None:
            check_max_hold_s(self.max_hold_s, self.hold_s)
        if len(self.widened_s) > len(self.rungs) or any(
            w > self.extension_s(i) + 1e-9 for i, w in enumerate(self.widened_s)
        ):
            raise LadderError(
                f"widenings {list(self.widened_s)}: a window widens only by its rung's extension"
            )
        if len(self.extended_s) > len(self.rungs) or any(
            not 0 <= e <= self.longest_hold_s - self.hold_s + 1e-9 for e in self.extended_s
        ):
            raise LadderError(
                f"extensions {list(self.extended_s)}: each must keep its hold within "
                f"{self.longest_hold_s:g} s"
            )

    @property
    def longest_hold_s(self) -> float:
        """The longest any rung may be held: `max_hold_s`, or `hold_s` without extensions."""
        return self.hold_s if self.max_hold_s is None else self.max_hold_s

    def extension_s(self, index: int) -> float:
        return self.extended_s[index] if index < len(self.extended_s) else 0.0

    def widening_s(self, index: int) -> float:
        return self.widened_s[index] if index < len(self.widened_s) else 0.0

    def rung_hold_s(self, index: int) -> float:
        """How long rung `index` is held so far: `hold_s` plus its extension."""
        return self.hold_s + self.extension_s(index)

    def rung_start_s(self, index: int) -> float:
        return sum(self.rung_hold_s(i) + self.idle_s for i in range(index))

    def window_s(self, index: int) -> tuple[float, float]:
        """The measure window of rung `index`: the trailing `measure_s` of its hold so far (and
        its widening), in seconds from the start of the test."""
        hold_end = self.rung_start_s(index) + self.rung_hold_s(index)
        return hold_end - self.measure_s - self.widening_s(index), hold_end

    def rung_phase(self, index: int) -> Phase:
        start = self.rung_start_s(index)
        users = self.rungs[index]
        return Phase(users, start, start + self.rung_hold_s(index), users)

    def extended(self, index: int, seconds: float, widen: bool = False) -> LadderSchedule:
        """This schedule with rung `index` held `seconds` longer (later rungs start later);
        `widen`: its window keeps its start and grows by as much."""
        extra = list(self.extended_s) + [0.0] * (index + 1 - len(self.extended_s))
        extra[index] += seconds
        wider = list(self.widened_s)
        if widen:
            wider += [0.0] * (index + 1 - len(wider))
            wider[index] += seconds
        return replace(self, extended_s=tuple(extra), widened_s=tuple(wider))

    def worst_case(self) -> LadderSchedule:
        """Every rung extended to `max_hold_s` (the schedule itself without it)."""
        extra = self.longest_hold_s - self.hold_s
        return replace(self, extended_s=(extra,) * len(self.rungs))

    @property
    def phases(self) -> tuple[Phase, ...]:
        out: list[Phase] = []
        for i in range(len(self.rungs)):
            held = self.rung_phase(i)
            out.append(held)
            last = i == len(self.rungs) - 1
            idle = max(self.idle_s, self.final_drain_s) if last else self.idle_s
            if idle > 0:
                out.append(Phase(0, held.end_s, held.end_s + idle, None))
        return tuple(out)

    @property
    def duration_s(self) -> float:
        return self.phases[-1].end_s

    def phase_at(self, run_time_s: float) -> Phase | None:
        """The phase running at `run_time_s`; None once the schedule is over."""
        return next((p for p in self.phases if p.start_s <= run_time_s < p.end_s), None)

    def settings(self, start_epoch: float | None = None) -> LadderSettings:
        return LadderSettings(
            rungs=list(self.rungs),
            hold_s=self.hold_s,
            measure_s=self.measure_s,
            idle_s=self.idle_s,
            start_epoch=start_epoch,
            max_hold_s=self.max_hold_s,
            extended_s=list(self.extended_s),
            widened_s=list(self.widened_s),
        )


def check_max_hold_s(max_hold_s: float, hold_s: float) -> float:
    """A `--max-hold-s` the schedule can honour: at least `--hold-s`, at most a day."""
    if not hold_s <= max_hold_s <= MAX_PHASE_S:  # also refuses nan and negatives
        raise LadderError(
            f"--max-hold-s {max_hold_s:g}: must be at least --hold-s {hold_s:g} (an unstable "
            f"rung's hold only grows) and at most {MAX_PHASE_S:g} s"
        )
    return max_hold_s


# No request outlives SageMaker's 60 s invocation ceiling, so no SLO can be longer.
MAX_SLO_MS = 60_000.0


def check_slo_ms(slo_ms: float) -> float:
    """A p95 TTFAB SLO the ladder can judge rungs against: above 0, at most the 60 s ceiling.
    Checked before the first request, so a bad one never costs a held rung."""
    if not 0 < slo_ms <= MAX_SLO_MS:  # also refuses nan
        raise LadderError(
            f"--slo-ms {slo_ms:g}: the SLO must be above 0 and at most {MAX_SLO_MS:g} ms "
            "(SageMaker's invocation ceiling)"
        )
    return slo_ms


def format_duration(seconds: float) -> str:
    seconds = math.ceil(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else (f"{m} min {s:02d} s" if m else f"{s} s")


def refinement_worst_case_s(schedule: LadderSchedule, refine_pct: float) -> tuple[int, float]:
    """The most probes a refinement can hold after this ladder, and their wall-clock time.

    Each probe is held `hold_s` (`max_hold_s` when every one is extended) after at least
    `idle_s` (and at least 1 s) without load.
    """
    probes = worst_case_probes_for_ladder(schedule.rungs, refine_pct)
    return probes, probes * (schedule.longest_hold_s + max(schedule.idle_s, 1.0))


def describe_schedule(
    schedule: LadderSchedule, slo_ms: float, refine_pct: float | None = None
) -> str:
    """The dry run's text: one line per rung and the wall-clock estimate (with `max_hold_s`,
    the worst case: every rung extended to it)."""
    worst = schedule.worst_case()
    extends = schedule.max_hold_s is not None and schedule.max_hold_s > schedule.hold_s
    lines = [
        f"ladder: {len(schedule.rungs)} rungs, hold {schedule.hold_s:g} s, measure the trailing "
        f"{schedule.measure_s:g} s, idle {schedule.idle_s:g} s between rungs, SLO p95 TTFAB "
        f"<= {slo_ms:g} ms",
    ]
    if extends:
        lines.append(
            f"an unstable rung is held {schedule.measure_s:g} s more at a time, up to "
            f"{schedule.max_hold_s:g} s (a steady one whose p95 interval straddles the SLO too, "
            "its window widening); the rows below are the worst case, every rung extended"
        )
    lines.append(f"{'rung':>6} {'users':>6} {'starts':>9} {'window':>17}")
    for i, users in enumerate(worst.rungs):
        w0, w1 = worst.window_s(i)
        lines.append(
            f"{i + 1:>6} {users:>6} {worst.rung_start_s(i):>8.0f}s {w0:>8.0f}s-{w1:>6.0f}s"
        )
    unextended = (
        f"; {format_duration(schedule.duration_s)} if no rung is extended" if extends else ""
    )
    lines.append(
        f"wall clock at most {format_duration(worst.duration_s)} "
        f"({worst.duration_s:.0f} s; the ladder stops early after the first failing rung"
        f"{unextended})"
    )
    if refine_pct is not None:
        probes, probe_s = refinement_worst_case_s(schedule, refine_pct)
        lines.append(
            f"refinement to max(1 user, {refine_pct:g} % of Q_max): at most {probes} probes of "
            f"{schedule.longest_hold_s:g} s, {format_duration(probe_s)} more; worst case in all "
            f"{format_duration(worst.duration_s + probe_s)}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True, slots=True)
class CpuReading:
    """Cumulative CPU seconds (user + system) of one load-generating process at `ts`."""

    worker: str
    ts: float
    cpu_s: float


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def mean_in_flight(samples: Iterable[Sample], w0: float, w1: float) -> float:
    """Time-averaged outstanding requests over [w0, w1)."""
    busy = sum(max(0.0, min(s.end, w1) - max(s.start, w0)) for s in samples)
    return busy / (w1 - w0)


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
        schedule.rung_hold_s(index), schedule.measure_s, schedule.max_hold_s, steady, undecided,
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

    reasons = []
    if in_flight < MIN_IN_FLIGHT_FRACTION * concurrency:
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

    p95 = percentile(ttfab, 95) if ttfab else None
    failed = rejected + errors
    heard = playback_figures(ok)
    meets = rung_meets_slo(p95, failed, len(done), slo_ms, heard.underrun_share, underrun_slo_share)
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
) -> QmaxArtifact:
    q_max, bracketed = ladder_outcome(rungs)
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
    return QmaxArtifact(
        fingerprint=fingerprint,
        slo_ms=slo_ms,
        q_max=q_max,
        bracketed=bracketed,
        uncontended_service_s=uncontended_service(rungs),
        rungs=rungs,
        ladder=settings,
        refinement=refinement,
        q_max_interval=None if confidence is None else q_max_interval_of(judged, confidence),
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
