"""Birth–death simulation of a surge arriving at the scale-out trigger.

An instance sits at occupancy n = C_scale_max when traffic jumps to `surge_ratio` × what it
serves there. Requests arrive as a Poisson process at that rate and leave at the measured
throughput X(n) for the current occupancy (X(0) = 0). A trial fails when n reaches Q_max
(the container starts shedding) before the new instance arrives, T_total seconds later.

All trials advance in lockstep and draw their random numbers every step, finished or not, so
each trial's path depends only on the seed and its index: a longer horizon extends every path
and can only add failures, and the result is identical for identical inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DEFAULT_TRIALS = 400
DEFAULT_SEED = 20_240_601


@dataclass(frozen=True)
class SurgeOutcome:
    probability: float  # share of trials that reached Q_max within the horizon
    trials: int
    reached: int


def shed_probability(
    arrival_rps: float,
    service_rps: Callable[[np.ndarray], np.ndarray],
    start: int,
    limit: int,
    horizon_s: float,
    *,
    trials: int = DEFAULT_TRIALS,
    seed: int = DEFAULT_SEED,
) -> SurgeOutcome:
    """Probability that occupancy climbs from `start` to `limit` within `horizon_s` seconds."""
    if trials < 1:
        raise ValueError("trials must be positive")
    if start >= limit:
        return SurgeOutcome(probability=1.0, trials=trials, reached=trials)
    if arrival_rps <= 0 or horizon_s <= 0:
        return SurgeOutcome(probability=0.0, trials=trials, reached=0)

    rng = np.random.default_rng(seed)
    n = np.full(trials, start, dtype=np.int64)
    t = np.zeros(trials)
    reached = np.zeros(trials, dtype=bool)
    running = np.ones(trials, dtype=bool)
    while running.any():
        death = np.asarray(service_rps(n.astype(float)), dtype=float)
        total = arrival_rps + death
        dt = rng.exponential(1.0, trials) / total
        is_birth = rng.random(trials) * total < arrival_rps
        t_next = t + dt
        step = running & (t_next <= horizon_s)
        n = np.where(step, n + np.where(is_birth, 1, -1), n)
        t = np.where(step, t_next, t)
        reached |= step & (n >= limit)
        running = step & ~reached
    count = int(reached.sum())
    return SurgeOutcome(probability=count / trials, trials=trials, reached=count)
