"""What the ladder's Locust shape reads: one immutable snapshot of the schedule as it stands.

The shape's `tick()` asks `phase_at(run time)` of the snapshot it holds; the conductor replaces
the snapshot whole each time the plan changes (a rung held longer, refinement begun, a probe
added or held longer), so the shape never reads a field half-way through a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tts_bench.measure.ladder.schedule import LadderSchedule, Phase


@dataclass(frozen=True, slots=True)
class ShapeSnapshot:
    """The coarse schedule (with its extensions so far), the phase awaiting its stability verdict,
    and the refinement's probes (run-time seconds)."""

    schedule: LadderSchedule = field(default_factory=LadderSchedule)
    # The rung (or probe) awaiting its stability verdict: its users stay on past its end until
    # the conductor extends it or lets it end (only with `max_hold_s`).
    held_open: Phase | None = None
    # Set when refinement begins: the coarse schedule ends here and the probes follow.
    coarse_end_s: float | None = None
    probes: tuple[Phase, ...] = ()
    # While true, the run idles (0 users) between probes instead of ending.
    refining: bool = False

    @property
    def spawn_rate(self) -> float:
        """A rung starts (and ends) at once: every user of the largest rung in one second."""
        return float(max(self.schedule.rungs))

    def phase_at(self, t: float) -> Phase | None:
        """The phase at run time `t`: coarse, then probes once refinement began; None: stop."""
        if self.held_open is not None and t >= self.held_open.start_s:
            return self.held_open
        if self.coarse_end_s is None or t < self.coarse_end_s:
            return self.schedule.phase_at(t)
        probe = next((p for p in self.probes if p.start_s <= t < p.end_s), None)
        if probe is not None:
            return probe
        last_end = max([self.coarse_end_s, *(p.end_s for p in self.probes)])
        if self.refining or t < last_end + self.schedule.final_drain_s:
            return Phase(0, t, t, None)
        return None

    def holding(self, phase: Phase | None) -> ShapeSnapshot:
        return replace(self, held_open=phase)

    def extended(self, schedule: LadderSchedule) -> ShapeSnapshot:
        """The coarse schedule with a rung held longer; a held-open rung grows with it."""
        return replace(self, schedule=schedule)

    def refinement_begun(self, coarse_end_s: float) -> ShapeSnapshot:
        return replace(self, coarse_end_s=coarse_end_s, refining=True)

    def probe_added(self, users: int, start_s: float) -> ShapeSnapshot:
        phase = Phase(users, start_s, start_s + self.schedule.hold_s, users)
        return replace(self, probes=(*self.probes, phase))

    def probe_extended(self, seconds: float) -> ShapeSnapshot:
        """The last probe held `seconds` longer (and held open until its next verdict)."""
        last = self.probes[-1]
        longer = Phase(last.users, last.start_s, last.end_s + seconds, last.rung)
        return replace(self, probes=(*self.probes[:-1], longer), held_open=longer)

    def refinement_over(self) -> ShapeSnapshot:
        return replace(self, refining=False)
