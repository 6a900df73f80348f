"""The closed-loop coverage table of docs/measuring.md: `python -m tests.ladder.coverage_table`.

For each (users, window), 1,000 windows of a simulated serial engine's closed loop
(`synthetic.serial_queue_ttfab_ms`, seed 25): how often the 95 % p95 interval held the true p95
(from 10^6 requests), counted as independent requests and at their effective sample size.
About a minute on this machine; the tests run a smaller version.
"""

from __future__ import annotations

import numpy as np

from tests.ladder.synthetic import serial_queue_ttfab_ms
from tts_bench.measure.quantile_interval import order_statistic_ranks, quantile_interval

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


if __name__ == "__main__":
    for case in CASES:
        print(coverage_row(*case))
