"""A confidence interval on a quantile, from the samples' order statistics.

Of n independent samples of a continuous distribution, the count B below its true q-quantile
is Binomial(n, q). So the interval between the l-th and the u-th smallest sample (1-based)
holds the quantile with probability P(l ≤ B ≤ u − 1), whatever the distribution. The ranks are
chosen equal-tailed: l the largest with P(B ≤ l − 1) ≤ α/2, u the smallest with
P(B ≤ u − 1) ≥ 1 − α/2, so the coverage is at least the level (it is discrete: a little more).
An end the samples are too few to give is unbounded (None): the largest of n samples bounds the
p95 from above at 95 % (two-sided) only from n = 72 on.

A closed loop's requests are not independent: on a serial engine each request waits for the
N − 1 served before it, so neighbours share most of their wait, and 90 requests at N = 25 carry
about as much information as 28 independent ones. Taken as independent, a 95 % interval there
held the true p95 in 28 % of simulated windows (tests/ladder/test_quantile_interval.py). So
`quantile_interval` takes the samples in the order they ended, estimates the effective sample
size n_eff from the autocorrelation of the indicator "at or below the sample quantile" (summed
until the first lag at which it is no longer positive: Geyer's initial positive sequence), takes
the ranks for floor(n_eff) samples and reads them at the same fractions of the n sorted samples.
Independent samples keep n_eff = n, and the exact interval above.

Pure arithmetic; no distribution is assumed or fitted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from tts_bench.errors import TtsBenchError

DEFAULT_CONFIDENCE: Final = 0.95
# Below 0.85 a window of two or three requests gets a lower end above numpy's interpolated p95,
# so a rung could fail on its interval while its p95 meets the SLO; from 0.9 up the interval
# holds that p95 (tests/ladder/test_quantile_interval.py). Past 0.999 no rung holds enough.
MIN_CONFIDENCE: Final = 0.9
MAX_CONFIDENCE: Final = 0.999


class ConfidenceError(TtsBenchError):
    """A confidence level no interval can be built at."""


def check_confidence(level: float) -> float:
    """A `--confidence` the interval can be built at: within [0.9, 0.999]."""
    if not MIN_CONFIDENCE <= level <= MAX_CONFIDENCE:  # also refuses nan
        raise ConfidenceError(
            f"--confidence {level:g}: give a level between {MIN_CONFIDENCE:g} and "
            f"{MAX_CONFIDENCE:g}, e.g. 0.95"
        )
    return level


def binomial_cdf(n: int, p: float) -> list[float]:
    """P(B ≤ k) for k = 0..n, B ~ Binomial(n, p), 0 < p < 1 (log space: 0.05^n underflows)."""
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n = math.lgamma(n + 1)
    cdf, total = [], 0.0
    for k in range(n + 1):
        total += math.exp(
            log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
        )
        cdf.append(min(total, 1.0))
    return cdf


def order_statistic_ranks(n: int, q: float, level: float) -> tuple[int | None, int | None]:
    """(l, u), the 1-based ranks of the order statistics that bound the q-quantile of n samples
    at `level`; None for an end n samples cannot give."""
    if n < 1:
        return None, None
    tail = (1 - level) / 2
    cdf = binomial_cdf(n, q)
    lower = max((k + 1 for k in range(n) if cdf[k] <= tail), default=None)
    upper = next((k + 1 for k in range(n) if cdf[k] >= 1 - tail), None)
    return lower, upper


def fewest_to_bound_above(q: float, level: float) -> int:
    """The fewest independent samples whose order statistics bound the q-quantile from above at
    `level` (72 for the p95 at 95 %): below it no rung can pass on its interval."""
    n = 1
    while order_statistic_ranks(n, q, level)[1] is None:
        n += 1
    return n


def coverage(n: int, q: float, ranks: tuple[int | None, int | None]) -> float:
    """P(x_(l) ≤ true quantile < x_(u)) for continuous samples: what the ranks promise."""
    lower, upper = ranks
    cdf = binomial_cdf(n, q)
    below_lower = 0.0 if lower is None else cdf[lower - 1]
    below_upper = 1.0 if upper is None else cdf[upper - 1]
    return below_upper - below_lower


def effective_sample_size(ordered_by_time: Sequence[float], q: float) -> float:
    """n / (1 + 2 Σ ρ_k) for the indicator "at or below the sample q-quantile", ρ_k its lag-k
    autocorrelation summed while positive; n when the samples show no positive dependence."""
    n = len(ordered_by_time)
    if n < 3:
        return float(n)
    values = np.asarray(ordered_by_time, dtype=float)
    below = (values <= np.quantile(values, q)).astype(float)
    below -= below.mean()
    variance = float(below @ below)
    if variance == 0.0:
        return float(n)
    total = 0.0
    for lag in range(1, n // 2):
        rho = float(below[:-lag] @ below[lag:]) / variance
        if rho <= 0:
            break
        total += rho
    return max(1.0, n / (1 + 2 * total))


@dataclass(frozen=True, slots=True)
class QuantileInterval:
    """Where the q-quantile lies at `level`: [lower, upper], either end None when unbounded;
    `effective_samples` what the samples were worth as independent ones."""

    q: float
    level: float
    samples: int
    effective_samples: float
    lower: float | None
    upper: float | None


def quantile_interval(values: Sequence[float], q: float, level: float) -> QuantileInterval:
    """The order-statistic interval on the q-quantile (0 < q < 1) of `values`, given in the
    order the requests ended, at `level`, with the ranks of their effective sample size."""
    n = len(values)
    n_eff = effective_sample_size(values, q)
    k = math.floor(n_eff + 1e-9)
    lower, upper = order_statistic_ranks(k, q, level)
    ordered = sorted(values)

    def at(rank: int | None) -> float | None:
        # rank r of k sits at the same fraction of the n sorted samples (r itself when k = n)
        return None if rank is None else float(ordered[math.ceil(rank * n / k - 1e-9) - 1])

    return QuantileInterval(
        q=q, level=level, samples=n, effective_samples=n_eff, lower=at(lower), upper=at(upper)
    )
