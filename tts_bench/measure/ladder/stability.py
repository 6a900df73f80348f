"""Is a rung's measure window steady? Its thirds must agree on p95 TTFAB.

The window is split into `SUB_WINDOWS` equal sub-windows by when requests ended. The rung is
stable when every sub-window holds a successful request and the largest sub-window p95 TTFAB
is within `STABILITY_TOLERANCE` of the smallest (max ≤ (1 + tolerance) · min): a queue still
growing or a server still warming shows as a p95 that climbs from third to third. Pure
arithmetic over raw samples; the ladder records the verdict per rung.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tts_bench.measure.samples import Outcome, Sample

SUB_WINDOWS = 3
STABILITY_TOLERANCE = 0.10


@dataclass(frozen=True, slots=True)
class Stability:
    sub_window_p95_ms: tuple[float | None, ...]  # None: no successful request in that third
    stable: bool

    @property
    def spread(self) -> float | None:
        """max/min − 1 over the sub-window p95s; None when a third is empty or min is 0."""
        values = self.sub_window_p95_ms
        if any(v is None for v in values) or min(values) <= 0:  # type: ignore[type-var]
            return None
        return max(values) / min(values) - 1  # type: ignore[type-var, operator]


def sub_windows(w0: float, w1: float, count: int = SUB_WINDOWS) -> list[tuple[float, float]]:
    edges = np.linspace(w0, w1, count + 1)
    return [(float(a), float(b)) for a, b in itertools.pairwise(edges)]


def stability(
    done: Sequence[Sample],
    window: tuple[float, float],
    tolerance: float = STABILITY_TOLERANCE,
    count: int = SUB_WINDOWS,
) -> Stability:
    """The verdict for the requests `done` (already the rung's, ended inside `window`)."""
    p95s: list[float | None] = []
    for a, b in sub_windows(*window, count):
        ttfab = [
            s.ttfab_ms
            for s in done
            if a <= s.end < b and s.outcome is Outcome.OK and s.ttfab_ms is not None
        ]
        p95s.append(float(np.percentile(ttfab, 95)) if ttfab else None)
    measured = [p for p in p95s if p is not None]
    stable = len(measured) == count and max(measured) <= (1 + tolerance) * min(measured) + 1e-9
    return Stability(sub_window_p95_ms=tuple(p95s), stable=stable)


def hold_extension_s(
    held_s: float, measure_s: float, max_hold_s: float | None, steady: bool
) -> float:
    """How much longer to hold a rung whose trailing `measure_s` was just judged; 0: judge it.

    An unstable rung (`--max-hold-s`) is held one more `measure_s` (less where that would pass
    `max_hold_s`), so its next window is made of requests none of which were judged before:
    sliding by less would re-judge mostly the same requests and let a noisy rung pass by
    re-rolling them.
    """
    if steady or max_hold_s is None:
        return 0.0
    step = min(measure_s, max_hold_s - held_s)
    return step if step > 1e-9 else 0.0


@dataclass(frozen=True, slots=True)
class HoldStep:
    """Hold a rung `seconds` longer; `widen`: its window grows back to where it began (an
    undecided rung pools more requests), else it slides onto requests not judged before."""

    seconds: float
    widen: bool


def next_hold(
    held_s: float,
    measure_s: float,
    max_hold_s: float | None,
    steady: bool,
    undecided: bool,
    widened: bool,
) -> HoldStep | None:
    """The next step of a rung's hold under `--max-hold-s`; None: judge it as it is.

    Unstable first: a moving window slides (`hold_extension_s`). A steady window whose p95
    interval straddles the SLO (issue 38) widens instead: only more requests narrow an
    interval, and a fresh window of the same size would re-roll the verdict rather than
    decide it. A widened window that turns unstable is judged as it is: sliding it would
    re-judge requests already judged.
    """
    if max_hold_s is None or (widened and not steady):
        return None
    step = min(measure_s, max_hold_s - held_s)
    if step <= 1e-9 or (steady and not undecided):
        return None
    return HoldStep(step, widen=steady)
