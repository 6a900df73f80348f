"""The arrivals a rehearsal sends: a synthetic spec or a trace, in the modelled fleet's time.

Rates and times are the fleet's: `diurnal:13.8:276:7200` is two hours from 13.8 to 276
requests/s and back, whatever the endpoint. On AWS every arrival is sent. On a local cloud of
curve instances one request stands for f = S × K of the fleet's (`--rate-scale` S slows each
instance's service S-fold; `--time-scale` K puts K of the cloud's seconds in one of the wall's),
so the arrivals are thinned f-fold: each instance's load relative to what it serves is the
fleet's, and the wall clock carries the fleet's rate ÷ S. The simulator (`simulate.traffic`)
generates and reads them, so a replay sees the same process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tts_bench.errors import TtsBenchError
from tts_bench.simulate.traffic import (
    Traffic,
    check_duration,
    load_trace,
    parse_synthetic,
    synthetic_traffic,
)

WALL_BUDGET_RPS = (
    40.0  # what this 2-core machine carries beside its local cloud (docs/rehearsal.md)
)


@dataclass(frozen=True)
class TrafficSpec:
    """Exactly one of a synthetic spec and a trace file, and how long (None: its default)."""

    synthetic: str | None
    trace: Path | None
    duration_s: float | None

    def describe(self) -> str:
        return self.synthetic if self.synthetic is not None else f"trace {self.trace}"


@dataclass(frozen=True)
class Arrivals:
    """Arrival times, seconds of the service's clock from the rehearsal's start, sorted."""

    times_s: np.ndarray
    duration_s: float
    description: str
    thinning: float  # how many of the fleet's requests each one stands for

    @property
    def count(self) -> int:
        return int(self.times_s.size)

    def peak_wall_rps(self, time_scale: float, window_s: float = 60.0) -> float:
        """The busiest `window_s` of the service's clock, as requests per wall second."""
        if not self.count:
            return 0.0
        bins = np.bincount((self.times_s // window_s).astype(np.int64))
        return float(bins.max()) / window_s * time_scale


def fleet_traffic(spec: TrafficSpec, surge_hold_s: float, rng: np.random.Generator) -> Traffic:
    """The fleet's traffic, unthinned (what `simulate` would replay for the same spec)."""
    if (spec.synthetic is None) == (spec.trace is None):
        raise TtsBenchError("give exactly one of --trace FILE and --synthetic SPEC")
    if spec.duration_s is not None:
        check_duration(spec.duration_s)
    if spec.trace is not None:
        return load_trace(spec.trace, spec.duration_s)
    shape = parse_synthetic(spec.synthetic or "")
    duration = spec.duration_s or shape.default_duration_s(surge_hold_s)
    return synthetic_traffic(shape, duration, surge_hold_s, rng)


def rehearsal_arrivals(
    spec: TrafficSpec, thinning: float, surge_hold_s: float, seed: int
) -> Arrivals:
    """The arrivals to send, each standing for `thinning` of the fleet's: a synthetic spec is
    drawn at its rates ÷ `thinning` (Poisson either way); a trace keeps each arrival with
    probability 1 / `thinning`."""
    if not (math.isfinite(thinning) and thinning > 0):
        raise TtsBenchError(f"a request standing for {thinning!r} requests: give a positive number")
    rng = np.random.default_rng(seed)
    if spec.synthetic is not None and spec.trace is None:
        shape = parse_synthetic(spec.synthetic)
        duration = spec.duration_s or shape.default_duration_s(surge_hold_s)
        check_duration(duration)
        thinned = replace(
            shape, low_rps=shape.low_rps / thinning, high_rps=shape.high_rps / thinning
        )
        traffic = synthetic_traffic(thinned, duration, surge_hold_s, rng)
        times = traffic.arrival_times_s(rng)
        return Arrivals(times, traffic.duration_s, f"synthetic {spec.synthetic}", thinning)
    traffic = fleet_traffic(spec, surge_hold_s, rng)
    if thinning < 1:
        raise TtsBenchError(
            f"a trace can be thinned, not multiplied: one request here stands for {thinning:g} of "
            "the fleet's; start the local cloud with --rate-scale × --time-scale of at least 1"
        )
    times = traffic.arrival_times_s(rng)
    kept = times[rng.random(times.size) < 1 / thinning]
    return Arrivals(kept, traffic.duration_s, traffic.description, thinning)
