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
from dataclasses import dataclass

import numpy as np

from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.schema import (
    LadderSettings,
    Provenance,
    QmaxArtifact,
    Rung,
    UncontendedService,
    ladder_outcome,
    rung_meets_slo,
)
from tts_bench.errors import TtsBenchError
from tts_bench.measure.samples import Outcome, Sample

DEFAULT_RUNGS = (1, 5, 10, 20, 30, 40, 50, 60)
DEFAULT_HOLD_S = 240.0
DEFAULT_MEASURE_S = 60.0
DEFAULT_IDLE_S = 30.0
DEFAULT_SLO_MS = 3000.0

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

    After the last rung the schedule idles for max(`idle_s`, `final_drain_s`) so the last
    requests and (in distributed runs) the workers' last reports are in before it ends.
    """

    rungs: tuple[int, ...] = DEFAULT_RUNGS
    hold_s: float = DEFAULT_HOLD_S
    measure_s: float = DEFAULT_MEASURE_S
    idle_s: float = DEFAULT_IDLE_S
    final_drain_s: float = FINAL_DRAIN_S

    def __post_init__(self) -> None:
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

    def rung_start_s(self, index: int) -> float:
        return index * (self.hold_s + self.idle_s)

    def window_s(self, index: int) -> tuple[float, float]:
        """The measure window of rung `index`, in seconds from the start of the test."""
        hold_end = self.rung_start_s(index) + self.hold_s
        return hold_end - self.measure_s, hold_end

    @property
    def phases(self) -> tuple[Phase, ...]:
        out: list[Phase] = []
        for i, users in enumerate(self.rungs):
            start = self.rung_start_s(i)
            out.append(Phase(users, start, start + self.hold_s, users))
            last = i == len(self.rungs) - 1
            idle = max(self.idle_s, self.final_drain_s) if last else self.idle_s
            if idle > 0:
                out.append(Phase(0, start + self.hold_s, start + self.hold_s + idle, None))
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
        )


def format_duration(seconds: float) -> str:
    seconds = math.ceil(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else (f"{m} min {s:02d} s" if m else f"{s} s")


def describe_schedule(schedule: LadderSchedule, slo_ms: float) -> str:
    """The dry run's text: one line per rung and the wall-clock estimate."""
    lines = [
        f"ladder: {len(schedule.rungs)} rungs, hold {schedule.hold_s:g} s, measure the trailing "
        f"{schedule.measure_s:g} s, idle {schedule.idle_s:g} s between rungs, SLO p95 TTFAB "
        f"<= {slo_ms:g} ms",
        f"{'rung':>6} {'users':>6} {'starts':>9} {'window':>17}",
    ]
    for i, users in enumerate(schedule.rungs):
        w0, w1 = schedule.window_s(i)
        lines.append(
            f"{i + 1:>6} {users:>6} {schedule.rung_start_s(i):>8.0f}s {w0:>8.0f}s-{w1:>6.0f}s"
        )
    lines.append(
        f"wall clock at most {format_duration(schedule.duration_s)} "
        f"({schedule.duration_s:.0f} s; the ladder stops early after the first failing rung)"
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


def rung_statistics(
    samples: Sequence[Sample],
    cpu: Sequence[CpuReading],
    concurrency: int,
    window: tuple[float, float],
    slo_ms: float,
) -> Rung:
    """One `Rung` from the raw samples of the whole run and the window's epoch bounds."""
    w0, w1 = window
    done = in_window(samples, concurrency, w0, w1)
    ok = [s for s in done if s.outcome is Outcome.OK]
    rejected = sum(1 for s in done if s.outcome is Outcome.REJECTED)
    errors = sum(1 for s in done if s.outcome is Outcome.ERROR)
    ttfab = [s.ttfab_ms for s in ok if s.ttfab_ms is not None]
    server_first = [s.server_first_chunk_ms for s in ok if s.server_first_chunk_ms is not None]
    latency = [s.latency_ms for s in ok]
    in_flight = mean_in_flight(samples, w0, w1)
    cpu_percent = client_cpu_percent(cpu, w0, w1)

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
    meets = rung_meets_slo(p95, failed, len(done), slo_ms)
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
    )


def ladder_rungs(
    samples: Sequence[Sample],
    cpu: Sequence[CpuReading],
    schedule: LadderSchedule,
    start_epoch: float,
    slo_ms: float,
    now: float,
) -> list[Rung]:
    """Rungs whose window closed by `now`, in order, up to and including the first that fails."""
    rungs: list[Rung] = []
    for i, concurrency in enumerate(schedule.rungs):
        w0, w1 = schedule.window_s(i)
        if start_epoch + w1 > now:
            break
        rung = rung_statistics(
            samples, cpu, concurrency, (start_epoch + w0, start_epoch + w1), slo_ms
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
) -> QmaxArtifact:
    q_max, bracketed = ladder_outcome(rungs)
    return QmaxArtifact(
        fingerprint=fingerprint,
        slo_ms=slo_ms,
        q_max=q_max,
        bracketed=bracketed,
        uncontended_service_s=uncontended_service(rungs),
        rungs=rungs,
        ladder=schedule.settings(start_epoch),
        provenance=provenance,
    )


@dataclass(frozen=True, slots=True)
class LiveFigures:
    """What the progress line shows for the rung being held."""

    finished: int
    ttfab_p95_ms: float | None
    in_flight: float


def live_figures(
    samples: Sequence[Sample],
    open_starts: Sequence[float],
    concurrency: int,
    since: float,
    now: float,
) -> LiveFigures:
    """The held rung over [since, now): requests still open count as in flight until `now`."""
    recent = [s for s in samples if s.rung == concurrency and since <= s.end < now]
    ttfab = [s.ttfab_ms for s in recent if s.outcome is Outcome.OK and s.ttfab_ms is not None]
    in_flight = 0.0
    if now > since:
        busy = sum(max(0.0, now - max(start, since)) for start in open_starts)
        in_flight = mean_in_flight(samples, since, now) + busy / (now - since)
    return LiveFigures(
        finished=len(recent),
        ttfab_p95_ms=percentile(ttfab, 95) if ttfab else None,
        in_flight=in_flight,
    )
