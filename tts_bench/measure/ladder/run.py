"""The ladder's decisions and record: what the shape holds, each verdict, and the artifact.

`LadderRun` is what the conductor (`conductor`) asks once the samples it needs are in:
whether a rung (or probe) whose window just closed is held longer, what the rung measured,
where the coarse ladder bracketed Q_max, which probes refinement held, and finally the
artifact. It keeps no clock and waits for nothing: every call takes the time it is about, so
each decision is tested on samples built by arithmetic. Each change to the schedule is
published as a new `ShapeSnapshot` for the Locust shape to read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import (
    DEFAULT_Q_MAX_BASIS,
    QmaxArtifact,
    QmaxBasis,
    Refinement,
    RefinementProbe,
    repeats_of,
)
from tts_bench.artifacts.rungs import Rung
from tts_bench.aws.clock import ServiceClock
from tts_bench.measure.ladder.board import board_row
from tts_bench.measure.ladder.refine import Bracket, coarse_bracket
from tts_bench.measure.ladder.schedule import format_duration
from tts_bench.measure.ladder.stability import next_hold
from tts_bench.measure.ladder.state import ShapeSnapshot
from tts_bench.measure.ladder.statistics import (
    VerdictRule,
    build_qmax_artifact,
    build_refinement,
    extend_unstable,
    ladder_rungs,
    live_figures,
    rung_statistics,
    window_stability,
)
from tts_bench.measure.ladder.store import Store

# The ladder's progress lines: `locust_child` passes on the lines of this logger.
logger = logging.getLogger("qmax")

Window = tuple[float, float]
RefineEnd = Literal["resolution", "client-bound", "interrupted", "undecided"]


@dataclass(frozen=True, slots=True)
class ProbeWindow:
    """A refinement probe as held: its users, its judged window (epoch) and its extension."""

    users: int
    w0: float
    w1: float
    extended_s: float
    repeat: int = 0  # --repeat: which bisection it belongs to (0: the first)


@dataclass
class LadderRun:
    """The ladder on the master (or the one local process), between the conductor's waits."""

    slo_ms: float
    start_epoch: float
    snapshot: ShapeSnapshot
    publish: Callable[[ShapeSnapshot], None] = lambda _snapshot: None
    refine_pct: float | None = None  # --refine: bisect a bracketed ladder to this precision
    underrun_slo: float | None = None  # --underrun-slo: a rung with more stalled streams fails
    confidence: float | None = None  # --confidence: each rung's p95 interval at this level
    repeat: int = 1  # --repeat: bisections around the knee, their probes taking turns
    q_max_basis: QmaxBasis = DEFAULT_Q_MAX_BASIS  # --q-max-basis: what the artifact's q_max is
    store: Store = field(default_factory=Store)
    probe_windows: list[ProbeWindow] = field(default_factory=list)
    refine_ended_by: RefineEnd | None = None  # the first bisection's end
    repeats_ended_by: dict[int, RefineEnd] = field(default_factory=dict)  # the others'
    # The web UI's "Ladder" tab: one row per rung or probe, live while held, final once judged.
    board: dict[int, dict[str, Any]] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)  # the bisections that ended

    # ------------------------------------------------------------------ the schedule

    def change(self, snapshot: ShapeSnapshot) -> None:
        self.snapshot = snapshot
        self.publish(snapshot)

    def epoch(self, seconds: float) -> float:
        return self.start_epoch + seconds

    def rung_window(self, index: int) -> Window:
        w0, w1 = self.snapshot.schedule.window_s(index)
        return self.epoch(w0), self.epoch(w1)

    def hold_open(self, index: int) -> None:
        """With --max-hold-s, coarse rung `index` stays on past its end until its verdict."""
        schedule = self.snapshot.schedule
        if schedule.max_hold_s is not None:
            self.change(self.snapshot.holding(schedule.rung_phase(index)))

    def release(self) -> None:
        """The held-open phase has its verdict: the schedule moves on."""
        self.change(self.snapshot.holding(None))

    def release_coarse(self) -> None:
        """The coarse ladder was stopped: release its rung, never a probe held open."""
        held, coarse_end = self.snapshot.held_open, self.snapshot.coarse_end_s
        if held is not None and (coarse_end is None or held.start_s < coarse_end):
            self.release()

    def fit_to_minutes(self, index: int) -> None:
        """Before coarse rung `index` starts: a rung held for whole minutes of the cloud's clock
        ends once it holds them (where its start falls in a minute is known only now)."""
        schedule = self.snapshot.schedule
        start = self.epoch(schedule.rung_start_s(index))
        fitted = schedule.fitted_to_minutes(index, start, ServiceClock.from_environment())
        if fitted == schedule:
            return
        self.change(self.snapshot.extended(fitted))
        logger.info(
            "c=%d: held %.0f s (planned %.0f s), %d whole minutes of the cloud's clock",
            schedule.rungs[index], fitted.rung_hold_s(index), schedule.rung_hold_s(index),
            fitted.whole_minutes,
        )  # fmt: skip

    def extend_rung(self, index: int, now: float) -> Window | None:
        """Coarse rung `index`'s window just closed: its next window when it is held longer."""
        schedule = self.snapshot.schedule
        longer = extend_unstable(
            schedule, index, self.store.samples, self.start_epoch, self.verdict_rule()
        )
        if longer is None:
            return None
        self.change(self.snapshot.extended(longer).holding(longer.rung_phase(index)))
        w0, w1 = (self.epoch(s) for s in longer.window_s(index))
        widened = longer.widening_s(index) > schedule.widening_s(index)
        self.log_extension(schedule.rungs[index], longer.rung_hold_s(index), w1, now, widened)
        return w0, w1

    def verdict_rule(self) -> VerdictRule | None:
        """With --confidence, what decides whether a steady rung is still undecided."""
        if self.confidence is None:
            return None
        return VerdictRule(self.slo_ms, self.confidence, self.underrun_slo)

    def extend_probe(self, users: int, window: Window, now: float) -> Window | None:
        """The last probe's `window` just closed: its next window when it is held longer."""
        w0, w1 = window
        schedule, probe = self.snapshot.schedule, self.snapshot.probes[-1]
        steady = window_stability(self.store.samples, users, window).stable
        rule = self.verdict_rule()
        undecided = (
            rule is not None and steady and rule.undecided(self.store.samples, users, window)
        )
        held = probe.end_s - probe.start_s
        widened = w1 - w0 > schedule.measure_s + 1e-9
        step = next_hold(
            held, schedule.measure_s, schedule.unstable_cap_s, steady, undecided, widened
        )
        if step is None:
            return None
        self.change(self.snapshot.probe_extended(step.seconds))
        self.log_extension(users, held + step.seconds, w1 + step.seconds, now, step.widen)
        return (w0 if step.widen else w0 + step.seconds), w1 + step.seconds

    def log_extension(
        self, users: int, hold_s: float, w1: float, now: float, widened: bool = False
    ) -> None:
        row = self.board.get(users)
        if row is not None:
            row["hold_s"] = f"{hold_s:.0f}"
        why = (
            "its p95 interval straddles the SLO, so its window widens"
            if widened
            else "its window was unstable"
        )
        logger.info(
            "c=%d: %s; held to %.0f s (at most %g s), judged again in %.0f s",
            users,
            why,
            hold_s,
            self.snapshot.schedule.unstable_cap_s,
            w1 - now,
        )

    # ------------------------------------------------------------------ figures and verdicts

    def progress(
        self, label: str, users: int, rung_start: float, window: Window, end: float, now: float
    ) -> None:
        """The held rung's last 10 s, on the board and in the log."""
        w0, w1 = window
        since = max(rung_start, now - 10.0)
        live = live_figures(self.store.samples, self.store.open_starts(), users, since, now)
        p95 = "-" if live.ttfab_p95_ms is None else f"{live.ttfab_p95_ms:.0f} ms"
        where = f"window opens in {w0 - now:.0f} s" if now < w0 else "measuring"
        self.board[users] = board_row(
            label, users, where, live.ttfab_p95_ms, None, live.in_flight, live.playback, None,
            f"{w1 - rung_start:.0f}",
        )  # fmt: skip
        logger.info(
            "%s c=%d: %.0f s left in hold (%s); last 10 s: p95 TTFAB %s over %d requests, "
            "%.2f in flight; at most %s left in the ladder",
            label,
            users,
            w1 - now,
            where,
            p95,
            live.finished,
            live.in_flight,
            format_duration(max(0.0, end - now)),
        )

    def statistics(self, users: int, window: Window) -> Rung:
        return rung_statistics(
            self.store.samples, self.store.cpu, users, window, self.slo_ms, self.underrun_slo,
            self.confidence,
        )  # fmt: skip

    def judge(self, users: int, window: Window) -> Rung:
        """The rung (or probe) measured over `window`, once its samples are all in."""
        rung = self.statistics(users, window)
        p95 = "-" if rung.ttfab_p95_ms is None else f"{rung.ttfab_p95_ms:.0f} ms"
        verdict = (
            f"unusable ({rung.unusable_reason})"
            if not rung.usable
            else ("passes" if rung.meets_slo else "fails the SLO")
        )
        if rung.usable and rung.verdict == "undecided":  # the p95 interval straddles the SLO
            verdict += " (undecided)"
        stalls = "-" if rung.underrun_share is None else f"{rung.underrun_share:.0%}"
        row = self.board.get(users, {})
        self.board[users] = board_row(
            row.get("rung", f"c={users}"), users, verdict, rung.ttfab_p95_ms, rung.achieved_rps,
            rung.client_mean_in_flight, rung, rung.stable, row.get("hold_s", "-"),
        )  # fmt: skip
        logger.info(
            "rung c=%d %s: p95 TTFAB %s%s (SLO %g ms), %.2f rps, %d ok / %d done, %.2f in flight, "
            "%s, underrun %s",
            users,
            verdict,
            p95,
            interval_text(rung),
            self.slo_ms,
            rung.achieved_rps,
            rung.ok,
            rung.completed,
            rung.client_mean_in_flight,
            "stable" if rung.stable else "UNSTABLE",
            stalls,
        )
        return rung

    def coarse_rungs(self, now: float) -> list[Rung]:
        """The coarse rungs whose window closed by `now`, up to the first that fails."""
        return ladder_rungs(
            self.store.samples,
            self.store.cpu,
            self.snapshot.schedule,
            self.start_epoch,
            self.slo_ms,
            now,
            self.underrun_slo,
            self.confidence,
        )

    def bracket(self, closed_at: float) -> Bracket | None:
        """The coarse ladder's bracket once the rung whose window ends at `closed_at` is judged."""
        return coarse_bracket(self.coarse_rungs(closed_at + 1e-6))

    # ------------------------------------------------------------------ refinement

    def begin_refinement(self, closed_at: float) -> None:
        """The coarse schedule ends where the failing rung's window closed; probes follow."""
        self.refine_ended_by = "interrupted"  # until the bisection says otherwise
        self.repeats_ended_by = dict.fromkeys(range(1, self.repeat), "interrupted")
        self.change(self.snapshot.refinement_begun(closed_at - self.start_epoch))

    def add_probe(self, users: int, start_s: float) -> Window:
        """A probe of `users` from run time `start_s` (held open with --max-hold-s); its window."""
        self.change(self.snapshot.probe_added(users, start_s))
        phase = self.snapshot.probes[-1]
        if self.snapshot.schedule.max_hold_s is not None:
            self.change(self.snapshot.holding(phase))
        w1 = self.epoch(phase.end_s)
        return w1 - self.snapshot.schedule.measure_s, w1

    def record_probe(self, users: int, window: Window, repeat: int = 0) -> None:
        """The last probe (of bisection `repeat`) was judged over `window`: keep its window and
        its extension."""
        held = self.snapshot.probes[-1]
        extended = held.end_s - held.start_s - self.snapshot.schedule.hold_s
        self.probe_windows.append(ProbeWindow(users, *window, extended, repeat))

    def end_refinement(self, ended_by: RefineEnd, repeat: int = 0) -> None:
        """Bisection `repeat` ended; once every repeat has, the run idles no more."""
        if repeat == 0:
            self.refine_ended_by = ended_by
        else:
            self.repeats_ended_by[repeat] = ended_by
        self.ended.add(repeat)
        if len(self.ended) >= self.repeat:
            self.change(self.snapshot.refinement_over())

    def refinements(self, coarse: list[Rung]) -> list[Refinement]:
        """Each bisection's probes recomputed from all samples (the first first); none when the
        ladder was not refined."""
        if self.refine_pct is None or self.refine_ended_by is None:
            return []
        if coarse_bracket(coarse) is None:
            return []
        ended = {0: self.refine_ended_by, **self.repeats_ended_by}
        return [
            build_refinement(coarse, self.probes_of(repeat), self.refine_pct, ended[repeat])
            for repeat in sorted(ended)
        ]

    def probes_of(self, repeat: int) -> list[RefinementProbe]:
        return [
            RefinementProbe(
                rung=self.statistics(p.users, (p.w0, p.w1)),
                window_start_epoch=p.w0,
                window_end_epoch=p.w1,
                extended_s=p.extended_s,
            )
            for p in self.probe_windows
            if p.repeat == repeat
        ]

    # ------------------------------------------------------------------ the artifact

    def artifact(
        self, fingerprint: Fingerprint, provenance: Provenance, now: float
    ) -> QmaxArtifact | None:
        """Every rung closed by `now`, recomputed from all samples; None when none closed."""
        rungs = self.coarse_rungs(now)
        if not rungs:
            return None
        refinements = self.refinements(rungs)
        return build_qmax_artifact(
            rungs,
            fingerprint,
            self.snapshot.schedule,
            self.slo_ms,
            provenance,
            self.start_epoch,
            underrun_slo_share=self.underrun_slo,
            refinement=refinements[0] if refinements else None,
            confidence=self.confidence,
            repeats=repeats_of(rungs, refinements, self.confidence),
            q_max_basis=self.q_max_basis,
        )


def interval_text(rung: Rung) -> str:
    """`, 95% interval [812, ∞) ms over 90 (worth 31): undecided` for the log; empty without
    an interval."""
    interval = rung.ttfab_p95_interval
    if interval is None:
        return ""
    lower = "0" if interval.lower_ms is None else f"{interval.lower_ms:.0f}"
    upper = "∞)" if interval.upper_ms is None else f"{interval.upper_ms:.0f}]"
    return (
        f", {interval.level:.0%} interval [{lower}, {upper} ms over {interval.samples} "
        f"(worth {interval.effective_samples:.0f}): {rung.verdict}"
    )
