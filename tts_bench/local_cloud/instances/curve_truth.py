"""The true Q_max of a serial curve instance, by arithmetic, and whether a ladder's interval held it.

A curve instance (`local_cloud.instances.curve_model`) whose throughput X(n) is one constant
rate μ serves its queue in order, the head finishing after an Exp(μ) time (redrawn when the
occupancy changes, which an exponential's lack of memory makes harmless). Under a closed loop
of N users sending back to back, a request arrives behind the N − 1 others, so it waits for
N − 1 exponential services: an Erlang(N − 1, μ) time, whose distribution function is
P(W ≤ t) = 1 − Σ_{i<k} e^(−μt) (μt)^i / i!, k = N − 1. Its TTFAB is that wait plus
min(first chunk, its own service), so its p95 lies between the Erlang's p95 and that plus the
first-chunk time. Pure arithmetic: `serial_curve` serves such an instance, and
`benchmarks/qmax_coverage_live.py` checks live ladders against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tts_bench.artifacts.qmax import QmaxInterval

P95 = 0.95


def erlang_cdf(k: int, rate: float, t: float) -> float:
    """P(sum of k independent Exp(rate) times ≤ t); k = 0 is the point mass at 0."""
    if k == 0 or t <= 0:
        return 1.0 if k == 0 else 0.0
    x = rate * t
    term, total = math.exp(-x), 0.0
    for i in range(k):
        total += term
        term *= x / (i + 1)
    return max(0.0, 1.0 - total)


def erlang_quantile(k: int, rate: float, q: float) -> float:
    """The q-quantile of an Erlang(k, rate) time, in seconds (bisection on its CDF)."""
    if k == 0:
        return 0.0
    lo, hi = 0.0, (k + 10.0 * math.sqrt(k) + 10.0) / rate
    for _ in range(200):
        mid = (lo + hi) / 2
        if erlang_cdf(k, rate, mid) < q:
            lo = mid
        else:
            hi = mid
    return hi


def true_p95_ms(users: int, rate_rps: float) -> float:
    """The wait's p95 at `users` users (the TTFAB's, less at most the first-chunk time)."""
    return 1000.0 * erlang_quantile(users - 1, rate_rps, P95)


def true_q_max(rate_rps: float, slo_ms: float, first_chunk_ms: float, limit: int = 10_000) -> int:
    """The highest concurrency whose TTFAB p95 meets the SLO, 0 when none does; refuses an SLO
    that the first-chunk bound leaves ambiguous (some N with p95 of the wait ≤ SLO < that +
    the first chunk), since the truth is then not known by this arithmetic."""
    q_max = 0
    for users in range(1, limit + 1):
        wait = true_p95_ms(users, rate_rps)
        if wait <= slo_ms < wait + first_chunk_ms:
            raise ValueError(
                f"SLO {slo_ms:g} ms lies within the first chunk of c={users}'s p95 ({wait:.1f} ms)"
            )
        if wait > slo_ms:
            return q_max
        q_max = users
    raise ValueError(f"no concurrency up to {limit} misses the SLO")


@dataclass(frozen=True, slots=True)
class Coverage:
    """One ladder judged against the truth."""

    held: bool  # conservative end (none: 0) ≤ truth < the first failed level (none: open above)
    conservative_within_step: bool  # the conservative end ≤ truth + one rung step
    known: bool  # a conservative end exists (c=1 passed)


def judge_interval(interval: QmaxInterval, truth: int, step: int) -> Coverage:
    low = interval.low or 0
    below_failure = interval.failing_above is None or truth < interval.failing_above
    return Coverage(
        held=low <= truth and below_failure,
        conservative_within_step=low <= truth + step,
        known=interval.low is not None,
    )
