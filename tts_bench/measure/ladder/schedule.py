"""The closed-loop Q_max ladder's schedule as pure arithmetic.

The schedule says how many users run at any second of the test (the Locust shape asks it),
where each rung's measure window lies (the trailing `measure_s` of its hold) and how long the
whole ladder takes (the dry run prints it); the limits a schedule's settings are checked
against live here too. Nothing here touches the network or Locust.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tts_bench.artifacts.rungs import LadderSettings
from tts_bench.aws.clock import ServiceClock
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder.quantile_interval import fewest_to_bound_above
from tts_bench.measure.ladder.refine import worst_case_probes_for_ladder

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
MINUTE_S = 60.0
# Past the last whole minute a rung must hold: the users leave on the shape's next tick.
MINUTE_MARGIN_S = 2.0

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
    # The longest an unstable rung is held when it is below `max_hold_s` (None: `max_hold_s`):
    # a rung given a long hold in advance (the verification's fleet level) raises `max_hold_s`
    # for itself, never for the rungs beside it.
    unstable_max_hold_s: float | None = None
    # A rung given an extension in advance ends once it has held this many whole minutes of the
    # cloud's clock (`fitted_to_minutes`, when it starts), never later than its extension.
    whole_minutes: int | None = None
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
        if self.whole_minutes is not None and not 1 <= self.whole_minutes <= MAX_PHASE_S / MINUTE_S:
            raise LadderError(f"--whole-minutes {self.whole_minutes}: give 1 to a day's minutes")
        if self.unstable_max_hold_s is not None and not (
            self.max_hold_s is not None
            and self.hold_s <= self.unstable_max_hold_s <= self.max_hold_s
        ):
            raise LadderError(
                f"--unstable-max-hold-s {self.unstable_max_hold_s:g}: must lie between --hold-s "
                "and --max-hold-s"
            )
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

    @property
    def unstable_cap_s(self) -> float | None:
        """The longest hold an unstable window earns (None: no extension)."""
        return self.max_hold_s if self.unstable_max_hold_s is None else self.unstable_max_hold_s

    def fitted_to_minutes(
        self, index: int, start_epoch: float, clock: ServiceClock
    ) -> LadderSchedule:
        """With `whole_minutes`, rung `index` starting at `start_epoch` (unix seconds) held just
        long enough to hold that many whole minutes of `clock` (a minute's Sum starts on its
        boundary), never longer than its extension planned; only its start fixes the phase.
        Three minutes hold two whole ones in any phase; fitted, the hold averages 2.5."""
        planned = self.extension_s(index)
        if self.whole_minutes is None or planned <= 0:
            return self
        first = math.ceil(clock.to_virtual(start_epoch) / MINUTE_S - 1e-9) * MINUTE_S
        end = clock.to_wall(first + self.whole_minutes * MINUTE_S) + MINUTE_MARGIN_S
        extra = list(self.extended_s)
        extra[index] = min(planned, max(0.0, end - start_epoch - self.hold_s))
        return replace(self, extended_s=tuple(extra))

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
            unstable_max_hold_s=self.unstable_max_hold_s,
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


def refinement_worst_case_s(
    schedule: LadderSchedule, refine_pct: float, repeat: int = 1
) -> tuple[int, float]:
    """The most probes a refinement (`repeat` bisections) can hold after this ladder, and
    their wall-clock time.

    Each probe is held `hold_s` (`max_hold_s` when every one is extended) after at least
    `idle_s` (and at least 1 s) without load.
    """
    probes = repeat * worst_case_probes_for_ladder(schedule.rungs, refine_pct)
    return probes, probes * (schedule.longest_hold_s + max(schedule.idle_s, 1.0))


def describe_schedule(
    schedule: LadderSchedule, slo_ms: float, refine_pct: float | None = None, repeat: int = 1
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
        probes, probe_s = refinement_worst_case_s(schedule, refine_pct, repeat)
        times = f", {repeat} bisections taking turns" if repeat > 1 else ""
        lines.append(
            f"refinement to max(1 user, {refine_pct:g} % of Q_max){times}: at most {probes} probes of "
            f"{schedule.longest_hold_s:g} s, {format_duration(probe_s)} more; worst case in all "
            f"{format_duration(worst.duration_s + probe_s)}"
        )
    return "\n".join(lines)


def describe_q_max_basis(confidence: float, basis: str) -> str:
    """The dry run's line on which Q_max the artifact will carry, and what the conservative one
    asks of a rung's window (issue 38)."""
    if basis == "point":
        return (
            "Q_max: the point value (--q-max-basis point), the highest rung whose p95 meets the "
            "SLO; a plan on it scales only a local image"
        )
    fewest = fewest_to_bound_above(0.95, confidence)
    return (
        f"Q_max: the conservative value, the highest rung with every rung up to it passed on its "
        f"p95's {confidence:.0%} interval; a rung passes only when its window finishes at least "
        f"{fewest} requests (more where closed-loop requests share their wait), and an undecided "
        "one is held longer only up to --max-hold-s"
    )
