"""When the T_total probe has recovered: pure rules over its samples (SPEC §4 step 4).

By default a probe held at 10 recovers when its p95 TTFAB, over a rolling 10 s window, falls
within 1.25 × the ladder's c=5 rung p95 and stays there for 60 s; a failed request counts as
slower than any bound. Where the probe holds the bound rung's users, the rung's p95 is measured
again just before the scale-out (`recovery_baseline`): on a machine whose load rose since the
ladder, recovery is back to what the instance served just before, the larger of the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from tts_bench.artifacts.ttotal import RecoveryBaseline
from tts_bench.measure.ttotal.probe import ProbeSample

ROLLING_WINDOW_S: Final = 10.0
# The fewest requests a re-measured p95 is read over; with fewer, the ladder's p95 alone judges.
BASELINE_MIN_REQUESTS: Final = 6


def rolling_p95_ok(samples: Sequence[ProbeSample], bound_ms: float, window_s: float) -> list[bool]:
    """For each sample (sorted by end): is the p95 TTFAB of the trailing window within bound?"""
    ends = np.array([s.end for s in samples])
    # A failure is slower than any bound (finite, so interpolation stays a number).
    values = np.array([1e12 if s.ttfab_ms is None else s.ttfab_ms for s in samples])
    verdicts = []
    for i, end in enumerate(ends):
        lo = int(np.searchsorted(ends, end - window_s, side="right"))
        window = values[lo : i + 1]
        verdicts.append(bool(np.percentile(window, 95) <= bound_ms))
    return verdicts


def recovery_time(
    samples: Sequence[ProbeSample],
    since: float,
    bound_ms: float,
    hold_s: float,
    now: float,
    window_s: float = ROLLING_WINDOW_S,
) -> float | None:
    """The first request end t ≥ `since` from which the rolling p95 stays within `bound_ms`
    at every request end through t + `hold_s`; None until `now` has passed t + `hold_s`."""
    ordered = sorted(samples, key=lambda s: s.end)
    ok = rolling_p95_ok(ordered, bound_ms, window_s)
    ends = [s.end for s in ordered]
    for i, start in enumerate(ends):
        if start < since or not ok[i]:
            continue
        if start + hold_s > now:
            return None
        horizon = [ok[j] for j in range(i, len(ends)) if ends[j] <= start + hold_s]
        if all(horizon):
            return start
    return None


def recovery_baseline(
    ladder_p95_ms: float,
    factor: float,
    before: Sequence[ProbeSample],
    why_not: str | None = None,
    min_requests: int = BASELINE_MIN_REQUESTS,
) -> RecoveryBaseline:
    """The bound recovery is judged by: `factor` × the larger of the ladder's bound-rung p95
    and the p95 of `before`, the probe's requests at that rung's users on one instance just
    before the scale-out. `why_not` says why `before` is no such measurement. A failed request
    before the scale-out, or fewer than `min_requests`, leaves the ladder's p95 alone: a slow
    or failing instance must not widen the bound it is judged by."""
    failed = sum(1 for s in before if not s.ok)
    if why_not is None and failed:
        why_not = f"{failed} of {len(before)} probe requests failed before the scale-out"
    elif why_not is None and len(before) < min_requests:
        why_not = f"{len(before)} probe requests before the scale-out, fewer than {min_requests}"
    if why_not is not None:
        return RecoveryBaseline(
            ladder_p95_ms=ladder_p95_ms, why_not_remeasured=why_not, factor=factor,
            bound_ms=factor * ladder_p95_ms,
        )  # fmt: skip
    p95 = float(np.percentile([s.ttfab_ms for s in before], 95))
    return RecoveryBaseline(
        ladder_p95_ms=ladder_p95_ms, remeasured_p95_ms=p95, remeasured_requests=len(before),
        factor=factor, bound_ms=factor * max(ladder_p95_ms, p95),
    )  # fmt: skip


def recovery_rule(
    probe: int, bound_rung: int, factor: float, hold_s: float, remeasured: bool = False
) -> str:
    again = " (or its p95 measured again just before the scale-out, when higher)"
    return (
        f"probe held at concurrency {probe}; recovered when its p95 TTFAB falls within "
        f"{factor:g}x of the ladder's c={bound_rung} rung p95{again if remeasured else ''} and "
        f"stays there for {hold_s:g} s"
    )
