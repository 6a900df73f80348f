"""The fast fleet model: every instance's occupancy, advanced by an exact event loop.

With least-outstanding-requests routing and identical instances, which instance holds which
occupancy does not matter, only how many instances hold each: the state is the histogram
`instances_at[n]` for n = 0 … queue_max_depth. The loop is the continuous-time Markov chain
itself (no time step): an arrival joins the lowest occupied level (shed when that is
queue_max_depth), a departure leaves level n with probability ∝ instances_at[n] · X(n), and
the time to the next departure is exponential at the total rate Σ instances_at[n] · X(n),
redrawn after every event (memorylessness makes that exact). Arrivals come from the traffic's
per-tick counts, spread uniformly within each tick (sequential uniform order statistics).

Why numba: a fleet day at 5000 requests/s is about 430 million events; the state is tiny, so
the cost is per event, which rules out array-at-a-time numpy (a step loop over 280-element
arrays measured about 100 s per simulated hour here) and is what a compiled loop is for.
numba compiles the loop once (cached on disk), takes the caller's numpy `Generator`, and
keeps the model in Python source beside its reference; a C helper would need a build step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from tts_bench.simulate.service import ServiceCurves
from tts_bench.simulate.traffic import Traffic

# float state: now, next arrival, previous arrival (or tick start), occupancy·time integral
_NOW, _NEXT, _PREV, _AREA = range(4)
# int state: tick, arrivals left in it, then this segment's arrivals, shed, over-SLO, peak total
_TICK, _LEFT, _ARRIVED, _SHED, _OVER, _PEAK = range(6)


@njit(cache=True)
def _next_arrival(counts, tick_s, fstate, istate, rng) -> None:
    while istate[_LEFT] == 0:
        istate[_TICK] += 1
        if istate[_TICK] >= counts.size:
            fstate[_NEXT] = np.inf
            return
        istate[_LEFT] = counts[istate[_TICK]]
        fstate[_PREV] = istate[_TICK] * tick_s
    end = (istate[_TICK] + 1) * tick_s
    # The earliest of `left` uniform points on (prev, end).
    spread = 1.0 - rng.random() ** (1.0 / istate[_LEFT])
    fstate[_NEXT] = fstate[_PREV] + (end - fstate[_PREV]) * spread


@njit(cache=True)
def advance_fleet(
    instances_at, service_rps, over_slo_from, counts, tick_s, fstate, istate, until_s, rng
):
    """Run the chain from fstate[_NOW] to `until_s`, updating the histogram and the tallies."""
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
    while True:
        departs = now + rng.standard_exponential() / rate if rate > 0.0 else np.inf
        arrives = fstate[_NEXT]
        event = min(departs, arrives)
        if event >= until_s:
            fstate[_AREA] += total * (until_s - now)
            fstate[_NOW] = until_s
            return
        fstate[_AREA] += total * (event - now)
        now = event
        if arrives <= departs:
            istate[_ARRIVED] += 1
            if hi < 0 or lo >= top:
                istate[_SHED] += 1
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
            istate[_LEFT] -= 1
            fstate[_PREV] = now
            _next_arrival(counts, tick_s, fstate, istate, rng)
        else:
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
    peak_occupancy: int  # the most requests in flight over the fleet at any moment
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
        self.fstate = np.zeros(4)
        self.istate = np.zeros(6, dtype=np.int64)
        self.istate[_TICK] = -1
        _next_arrival(self.counts, self.tick_s, self.fstate, self.istate, rng)

    @property
    def in_service(self) -> int:
        return int(self.instances_at.sum())

    def advance(self, until_s: float) -> Segment:
        self.istate[_ARRIVED:] = 0
        self.fstate[_AREA] = 0.0
        advance_fleet(
            self.instances_at, self.curves.service_rps, self.curves.over_slo_from,
            self.counts, self.tick_s, self.fstate, self.istate, until_s, self.rng,
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
    curves_rps = np.zeros(3)
    counts = np.zeros(1, dtype=np.int64)
    fstate, istate = np.zeros(4), np.zeros(6, dtype=np.int64)
    istate[_TICK] = -1
    rng = np.random.default_rng(0)
    _next_arrival(counts, 1.0, fstate, istate, rng)
    advance_fleet(np.zeros(3, dtype=np.int64), curves_rps, 3, counts, 1.0, fstate, istate, 1.0, rng)
