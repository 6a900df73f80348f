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


@dataclass(frozen=True)
class LossOutcome:
    """An instance that refuses arrivals at `limit` (its admission bound), over a horizon."""

    shed_share: float  # refused arrivals ÷ all arrivals, pooled over the trials
    arrivals_per_trial: float
    mean_occupancy: float  # time-average over the horizon, mean over trials
    occupancy_at: tuple[float, ...]  # mean occupancy over trials at each of `grid_s`
    trials: int


def loss_system(
    arrival_rps: float,
    service_rps: Callable[[np.ndarray], np.ndarray],
    limit: int,
    horizon_s: float,
    grid_s: np.ndarray,
    *,
    start: int = 0,
    trials: int = DEFAULT_TRIALS,
    seed: int = DEFAULT_SEED,
) -> LossOutcome:
    """The same birth–death chain as `shed_probability`, run to the horizon with arrivals at
    `limit` refused (shed) instead of ending the trial: what an open-loop surge against one
    bounded instance should see. Lockstep trials, one seeded generator, as above."""
    if trials < 1 or limit < 1:
        raise ValueError("trials and limit must be positive")
    grid_s = np.asarray(grid_s, dtype=float)
    rng = np.random.default_rng(seed)
    n = np.full(trials, min(start, limit), dtype=np.int64)
    t = np.zeros(trials)
    arrivals = np.zeros(trials, dtype=np.int64)
    shed = np.zeros(trials, dtype=np.int64)
    area = np.zeros(trials)  # ∫ n dt
    at_grid = np.zeros((trials, grid_s.size))
    running = np.ones(trials, dtype=bool)
    if arrival_rps <= 0 or horizon_s <= 0:
        running[:] = False
    while running.any():
        death = np.asarray(service_rps(n.astype(float)), dtype=float)
        total = arrival_rps + death
        dt = rng.exponential(1.0, trials) / total
        is_birth = rng.random(trials) * total < arrival_rps
        t_next = np.minimum(t + dt, horizon_s)
        # Occupancy n holds over [t, t_next): record it at the grid points in that span.
        covered = (
            running[:, None] & (grid_s[None, :] >= t[:, None]) & (grid_s[None, :] < t_next[:, None])
        )
        at_grid = np.where(covered, n[:, None], at_grid)
        area += np.where(running, n * (t_next - t), 0.0)
        step = running & (t + dt <= horizon_s)
        born = step & is_birth
        arrivals += born
        refused = born & (n >= limit)
        shed += refused
        n = np.where(step & ~refused, n + np.where(is_birth, 1, -1), n)
        t = np.where(running, t_next, t)
        running = step
    at_grid = np.where(grid_s[None, :] >= horizon_s, n[:, None], at_grid)
    total_arrivals = int(arrivals.sum())
    return LossOutcome(
        shed_share=float(shed.sum()) / total_arrivals if total_arrivals else 0.0,
        arrivals_per_trial=total_arrivals / trials,
        mean_occupancy=float(area.mean() / horizon_s) if horizon_s > 0 else 0.0,
        occupancy_at=tuple(float(v) for v in at_grid.mean(axis=0)),
        trials=trials,
    )


def stationary_occupancy(
    arrival_rps: float, service_rps: Callable[[np.ndarray], np.ndarray], limit: int
) -> float:
    """Mean occupancy of one instance offered `arrival_rps` (Poisson) that serves at X(n) and
    refuses arrivals at `limit`: the birth–death chain's stationary mean, in closed form
    (π(n) ∝ Π_{k ≤ n} λ / X(k), computed in logs so a long queue never overflows)."""
    if limit < 1:
        raise ValueError("limit must be positive")
    if arrival_rps <= 0:
        return 0.0
    n = np.arange(1, limit + 1, dtype=float)
    rates = np.asarray(service_rps(n), dtype=float)
    if np.any(rates <= 0):
        return float(limit)  # an occupancy that serves nothing only grows
    log_pi = np.concatenate(([0.0], np.cumsum(np.log(arrival_rps) - np.log(rates))))
    weights = np.exp(log_pi - log_pi.max())
    return float(np.dot(np.arange(limit + 1), weights) / weights.sum())


@dataclass(frozen=True)
class PooledOutcome:
    """A fleet of identical instances under least-outstanding routing, in its stationary state."""

    instances: int
    shed_share: float  # arrivals refused (every instance at `limit`) ÷ arrivals: PASTA
    mean_occupancy: float  # per instance


def pooled_stationary(
    instances: int,
    arrival_rps: float,
    service_rps: Callable[[np.ndarray], np.ndarray],
    limit: int,
) -> PooledOutcome:
    """`instances` instances offered `arrival_rps` each (Poisson), each serving at X(n) and
    refusing at `limit`, routed to the least-outstanding one: the chain of the fleet's total
    K, the requests spread evenly (K mod N instances hold one more), so the fleet serves
    (N − K mod N)·X(⌊K/N⌋) + (K mod N)·X(⌈K/N⌉) and sheds only at K = N·limit. One instance is
    `stationary_occupancy`'s chain. Closed form, in logs; N·limit states."""
    if instances < 1 or limit < 1:
        raise ValueError("instances and limit must be positive")
    if arrival_rps <= 0:
        return PooledOutcome(instances, 0.0, 0.0)
    total = np.arange(1, instances * limit + 1)
    low, extra = total // instances, total % instances
    rates = (instances - extra) * np.asarray(
        service_rps(low.astype(float)), dtype=float
    ) + extra * np.asarray(service_rps((low + 1).astype(float)), dtype=float)
    if np.any(rates <= 0):
        return PooledOutcome(instances, 1.0, float(limit))
    log_pi = np.concatenate(([0.0], np.cumsum(np.log(instances * arrival_rps) - np.log(rates))))
    weights = np.exp(log_pi - log_pi.max())
    weights /= weights.sum()
    occupancy = float(np.dot(np.arange(total.size + 1), weights)) / instances
    return PooledOutcome(instances, float(weights[-1]), occupancy)
