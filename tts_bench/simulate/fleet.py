"""The fast fleet model: every instance's occupancy, advanced by an exact event loop.

With least-outstanding-requests routing and identical instances, which instance holds which
occupancy does not matter, only how many instances hold each: the state is the histogram
`instances_at[n]` for n = 0 … queue_max_depth. The loop is the continuous-time Markov chain
itself (no time step): an arrival joins the lowest occupied level (shed when that is
queue_max_depth), a departure leaves level n with probability ∝ instances_at[n] · X(n), and
the time to the next departure is exponential at the total rate Σ instances_at[n] · X(n),
redrawn after every event (memorylessness makes that exact). Arrivals come from the traffic's
per-tick counts, spread uniformly within each tick (uniform order statistics, drawn as
normalised sums of exponentials).

Why numba: a fleet day at 5000 requests/s is about 430 million events; the state is tiny, so
the cost is per event, which rules out array-at-a-time numpy (a 0.1 s-step loop over 280-element
arrays took 16.5 s per 2 simulated hours here, about 200 s a day, and is already coarse) and is what a compiled loop is for.
numba compiles the loop once (cached on disk), takes the caller's numpy `Generator`, and
keeps the model in Python source beside its reference; a C helper would need a build step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from tts_bench.simulate.service import ServiceCurves
from tts_bench.simulate.traffic import Traffic

# float state: now, next arrival, departure clock budget, occupancy·time integral
_NOW, _NEXT, _BUDGET, _AREA = range(4)
# int state: tick, arrivals of the tick taken, then this segment's arrivals, shed, over-SLO, peak
_TICK, _TAKEN, _ARRIVED, _SHED, _OVER, _PEAK = range(6)


@njit(cache=True)
def _next_arrival(counts, tick_s, spacing, fstate, istate, rng) -> None:
    """The next arrival time: a tick's `count` arrivals are uniform order statistics on it,
    drawn at the tick's start as normalised sums of count + 1 exponentials into `spacing`."""
    tick = istate[_TICK]
    while tick < 0 or istate[_TAKEN] >= counts[tick]:
        tick += 1
        istate[_TICK] = tick
        istate[_TAKEN] = 0
        if tick >= counts.size:
            fstate[_NEXT] = np.inf
            return
        if counts[tick] > 0:
            cumulative = 0.0
            for j in range(counts[tick] + 1):
                cumulative += rng.standard_exponential()
                spacing[j] = cumulative
            scale = tick_s / cumulative
            for j in range(counts[tick]):
                spacing[j] = tick * tick_s + spacing[j] * scale
    fstate[_NEXT] = spacing[istate[_TAKEN]]
    istate[_TAKEN] += 1


@njit(cache=True)
def advance_fleet(
    instances_at, service_rps, over_slo_from, counts, tick_s, spacing, fstate, istate, until_s, rng
):
    """Run the chain from fstate[_NOW] to `until_s`, updating the histogram and the tallies.

    The departure clock is a unit exponential `budget` spent at the current total rate (the
    next-reaction form of the same chain): an arrival changes the rate but not the budget
    left, so only departures draw a new one.
    """
    top = instances_at.size - 1
    total = 0
    rate = 0.0
    lo, hi = top + 1, -1
    for level in range(top + 1):
        if instances_at[level] > 0:
            total += level * instances_at[level]
            rate += instances_at[level] * service_rps[level]
            lo = min(lo, level)
            hi = max(hi, level)
    if total > istate[_PEAK]:
        istate[_PEAK] = total
    now = fstate[_NOW]
    budget = fstate[_BUDGET]
    while True:
        departs = now + budget / rate if rate > 0.0 else np.inf
        arrives = fstate[_NEXT]
        event = min(departs, arrives)
        if event >= until_s:
            fstate[_AREA] += total * (until_s - now)
            if rate > 0.0:
                budget -= rate * (until_s - now)
            fstate[_BUDGET] = budget
            fstate[_NOW] = until_s
            return
        fstate[_AREA] += total * (event - now)
        if arrives <= departs:
            if rate > 0.0:
                budget -= rate * (event - now)
            now = event
            istate[_ARRIVED] += 1
            if hi < 0 or lo >= top:
                istate[_SHED] += 1  # its container (if any) receives it, then refuses: counted
                istate[_PEAK] = max(istate[_PEAK], total + 1 if hi >= 0 else 0)
            else:
                instances_at[lo] -= 1
                instances_at[lo + 1] += 1
                rate += service_rps[lo + 1] - service_rps[lo]
                total += 1
                if lo + 1 >= over_slo_from:
                    istate[_OVER] += 1
                if lo + 1 > hi:
                    hi = lo + 1
                if instances_at[lo] == 0:
                    lo += 1
                if total > istate[_PEAK]:
                    istate[_PEAK] = total
            _next_arrival(counts, tick_s, spacing, fstate, istate, rng)
        else:
            now = event
            budget = rng.standard_exponential()
            pick = rng.random() * rate
            level = hi
            while level > 1:
                weight = instances_at[level] * service_rps[level]
                if pick < weight:
                    break
                pick -= weight
                level -= 1
            while instances_at[level] == 0:  # float rounding walked past the last level
                level += 1
            instances_at[level] -= 1
            instances_at[level - 1] += 1
            rate += service_rps[level - 1] - service_rps[level]
            total -= 1
            if level - 1 < lo:
                lo = level - 1
            while instances_at[hi] == 0:
                hi -= 1
            if total == 0:
                rate = 0.0


@dataclass(frozen=True)
class Segment:
    """What happened between two calls to `advance`."""

    arrived: int
    shed: int
    over_slo: int
    # The most requests in flight over the fleet at any moment, a refused one counted while
    # its container receives it (as ConcurrentRequestsPerModel counts it).
    peak_occupancy: int
    occupancy_s: float  # ∫ requests in flight dt


class FleetQueues:
    """The fast model's state: the occupancy histogram plus the arrival clock."""

    def __init__(
        self, curves: ServiceCurves, traffic: Traffic, in_service: int, rng: np.random.Generator
    ) -> None:
        self.curves = curves
        self.rng = rng
        self.instances_at = np.zeros(curves.queue_max_depth + 1, dtype=np.int64)
        self.instances_at[0] = in_service
        self.counts = np.ascontiguousarray(traffic.counts, dtype=np.int64)
        self.tick_s = float(traffic.tick_s)
        self.spacing = np.zeros(int(self.counts.max(initial=0)) + 1)
        self.fstate = np.zeros(4)
        self.fstate[_BUDGET] = rng.standard_exponential()
        self.istate = np.zeros(6, dtype=np.int64)
        self.istate[_TICK] = -1
        _next_arrival(self.counts, self.tick_s, self.spacing, self.fstate, self.istate, rng)

    @property
    def in_service(self) -> int:
        return int(self.instances_at.sum())

    def advance(self, until_s: float) -> Segment:
        self.istate[_ARRIVED:] = 0
        self.fstate[_AREA] = 0.0
        advance_fleet(
            self.instances_at, self.curves.service_rps, self.curves.over_slo_from,
            self.counts, self.tick_s, self.spacing, self.fstate, self.istate, until_s, self.rng,
        )  # fmt: skip
        return Segment(
            int(self.istate[_ARRIVED]), int(self.istate[_SHED]), int(self.istate[_OVER]),
            int(self.istate[_PEAK]), float(self.fstate[_AREA]),
        )  # fmt: skip

    def add(self, count: int) -> None:
        self.instances_at[0] += count

    def retire_least_loaded(self, count: int) -> None:
        for _ in range(count):
            level = int(np.flatnonzero(self.instances_at)[0])
            self.instances_at[level] -= 1


def compile_fleet_model() -> None:
    """Compile (or load from numba's cache) the loop, so a timed run measures only the run."""
    counts = np.ones(1, dtype=np.int64)
    spacing, fstate, istate = np.zeros(2), np.ones(4), np.zeros(6, dtype=np.int64)
    istate[_TICK] = -1
    rng = np.random.default_rng(0)
    _next_arrival(counts, 1.0, spacing, fstate, istate, rng)
    instances_at = np.array([1, 0, 0], dtype=np.int64)
    advance_fleet(
        instances_at, np.array([0.0, 1.0, 1.0]), 3, counts, 1.0, spacing, fstate, istate, 1.0, rng
    )
