"""The closed-loop coverage table of docs/measuring.md: `python -m tests.ladder.coverage_table`.

For each (users, window), 1,000 windows of a simulated serial engine's closed loop
(`synthetic.serial_queue_ttfab_ms`, seed 25): how often the 95 % p95 interval held the true p95
(from 10^6 requests), counted as independent requests and at their effective sample size.
Then twenty simulated ladders (rungs 20–32, one window each, stopping after the first rung
whose p95 misses the SLO) per (SLO, window): how many Q_max intervals hold the true Q_max, how
many conservative ends lie at most one rung above it, and how many are known at all.
A few minutes on this machine; the tests run smaller versions.
"""

from __future__ import annotations

import numpy as np

from tests.core.ladders import rung
from tests.ladder.synthetic import serial_queue_ttfab_ms
from tts_bench.artifacts.qmax import QmaxInterval, q_max_interval_of
from tts_bench.measure.ladder.quantile_interval import order_statistic_ranks, quantile_interval

CASES = ((1, 90), (8, 300), (25, 90), (25, 1000))
TRIALS = 1000


def coverage_row(users: int, window: int) -> str:
    rng = np.random.default_rng(25)
    true_p95 = float(np.percentile(serial_queue_ttfab_ms(users, 1_000_000, rng), 95))
    lower, upper = order_statistic_ranks(window, 0.95, 0.95)
    held = held_naive = unbounded = 0
    worth = []
    for _ in range(TRIALS):
        ttfab = serial_queue_ttfab_ms(users, window + 200, rng)[200:]  # past the warm-up
        found = quantile_interval(list(ttfab), 0.95, 0.95)
        worth.append(found.effective_samples)
        held += (found.lower is None or found.lower <= true_p95) and (
            found.upper is None or true_p95 <= found.upper
        )
        unbounded += found.upper is None
        ordered = np.sort(ttfab)
        held_naive += (lower is None or ordered[lower - 1] <= true_p95) and (
            upper is None or true_p95 <= ordered[upper - 1]
        )
    return (
        f"| {users}, {window} | {true_p95:,.0f} ms | {100 * held_naive / TRIALS:.1f} % | "
        f"{100 * held / TRIALS:.1f} % | {100 * unbounded / TRIALS:.1f} % | "
        f"{np.median(worth):.0f} |"
    )


def ladder_row(slo_ms: float, window: int) -> str:
    truth, held, within_step, known = ladder_coverage(LADDER_RUNGS, window, slo_ms, LADDERS)
    return (
        f"| {slo_ms:,.0f} ms, {window} | {truth} | {held} of {LADDERS} | {within_step} of "
        f"{LADDERS} | {known} of {LADDERS} |"
    )


LADDER_RUNGS = tuple(range(20, 33))
LADDERS = 20
LADDER_CASES = ((2500.0, 90), (2500.0, 300), (2500.0, 1000), (2900.0, 90), (2900.0, 1000))


if __name__ == "__main__":
    for case in CASES:
        print(coverage_row(*case))
    for slo_ms, window in LADDER_CASES:
        print(ladder_row(slo_ms, window))


def simulated_ladder(
    rungs: tuple[int, ...], window: int, slo_ms: float, rng: np.random.Generator, level: float
) -> QmaxInterval:
    """One ladder against the simulated serial engine: each rung a window of `window` requests,
    judged on its p95 interval; it stops after the first rung whose p95 misses the SLO."""
    judged = []
    for users in rungs:
        ttfab = serial_queue_ttfab_ms(users, window + 200, rng)[200:]
        found = quantile_interval(list(ttfab), 0.95, level)
        p95 = float(np.percentile(ttfab, 95))
        judged.append(
            rung(users, 10.0, p95, slo_ms=slo_ms, interval=(found.lower, found.upper, level))
        )
        if p95 > slo_ms:
            break
    return q_max_interval_of(judged, level)


def true_q_max(rungs: tuple[int, ...], slo_ms: float, rng: np.random.Generator) -> int:
    """The highest rung whose p95 from 10^6 requests meets the SLO (p95 grows with users)."""
    meets = [u for u in rungs if np.percentile(serial_queue_ttfab_ms(u, 10**6, rng), 95) <= slo_ms]
    return max(meets, default=0)


def ladder_coverage(
    rungs: tuple[int, ...], window: int, slo_ms: float, ladders: int, seed: int = 38
) -> tuple[int, int, int, int]:
    """(true Q_max, ladders whose interval holds it, whose conservative end is at most one step
    above it, whose conservative end is known). Held: low ≤ true < failing_above, a missing low
    read as 0 and a missing failure as open above."""
    rng = np.random.default_rng(seed)
    truth = true_q_max(rungs, slo_ms, rng)
    step = rungs[1] - rungs[0]
    held = within_step = known = 0
    for _ in range(ladders):
        found = simulated_ladder(rungs, window, slo_ms, rng, 0.95)
        low = found.low or 0
        held += low <= truth and (found.failing_above is None or truth < found.failing_above)
        within_step += low <= truth + step
        known += found.low is not None
    return truth, held, within_step, known
