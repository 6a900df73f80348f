"""The clairvoyant fleet: the yardstick every policy's instance-hours are read against.

A fleet that knows the day's arrivals in advance needs no metric, alarm or policy. Each minute
it holds the fewest instances that serve that minute's arrivals at λ_out each (the fleet rule's
load level, so the surge headroom is kept), each started a planned T_total before the first
minute that needs it and released after the last. Between two needs, an instance is kept when
the gap is no longer than T_total: releasing it and starting another costs the start-up again.

Cost is counted as `replay` counts it: an instance is paid for from its launch (in service or
launching) to its release; the instances the first minute needs are there at time 0, as a
simulated fleet starts sized for its first minute, and none is launched before time 0. Demand is nested (the minutes that need k + 1
instances are among those that need k), so the k-th instance is simply the one the minutes
needing at least k hold. Any policy that keeps the surge promise at every minute pays at least
this; docs/simulation.md gives the definition and a worked example.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tts_bench.planning.schedule.day import instances_needed
from tts_bench.simulate.traffic import Traffic

MINUTE_S = 60.0


@dataclass(frozen=True)
class OracleFleet:
    instance_seconds: float
    launches: int  # instances started after time 0
    peak: int
    per_instance_rps: float  # λ_out
    lead_s: float  # how long before its first needed minute an instance is launched

    @property
    def instance_hours(self) -> float:
        return self.instance_seconds / 3600.0


def minute_rates(traffic: Traffic) -> tuple[np.ndarray, np.ndarray]:
    """Each minute's offered rate (arrivals / its length) and its length in seconds; the last
    minute is as long as the traffic leaves it."""
    minutes = max(1, math.ceil(traffic.duration_s / MINUTE_S - 1e-9))
    starts_s = np.arange(len(traffic.counts)) * traffic.tick_s
    which = np.minimum((starts_s / MINUTE_S + 1e-9).astype(np.int64), minutes - 1)
    arrivals = np.bincount(which, weights=traffic.counts, minlength=minutes)
    lengths = np.full(minutes, MINUTE_S)
    lengths[-1] = traffic.duration_s - MINUTE_S * (minutes - 1)
    return arrivals / lengths, lengths


def oracle_fleet(traffic: Traffic, per_instance_rps: float, lead_s: float) -> OracleFleet:
    if per_instance_rps <= 0 or lead_s < 0:
        raise ValueError("the oracle needs a positive λ_out and a non-negative lead")
    rates, lengths = minute_rates(traffic)
    needed = instances_needed(rates, per_instance_rps)
    ends_s = np.cumsum(lengths)
    starts_s = ends_s - lengths
    total_s = 0.0
    launches = 0
    for k in range(1, int(needed.max()) + 1):
        held = needed >= k
        # Runs of consecutive minutes that need the k-th instance: [first, last] indices.
        edges = np.diff(np.concatenate(([0], held.astype(np.int8), [0])))
        firsts, lasts = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
        run_start, run_end = starts_s[firsts[0]], ends_s[lasts[0]]
        for first, last in zip(firsts[1:], lasts[1:], strict=True):
            if starts_s[first] - run_end <= lead_s:  # cheaper to keep it through the gap
                run_end = ends_s[last]
                continue
            total_s += _paid(run_start, run_end, lead_s)
            launches += int(run_start > 0)
            run_start, run_end = starts_s[first], ends_s[last]
        total_s += _paid(run_start, run_end, lead_s)
        launches += int(run_start > 0)
    return OracleFleet(float(total_s), launches, int(needed.max()), per_instance_rps, lead_s)


def _paid(start_s: float, end_s: float, lead_s: float) -> float:
    """From the launch (`lead_s` early, but not before time 0) to the release."""
    return end_s - start_s + min(lead_s, start_s)
