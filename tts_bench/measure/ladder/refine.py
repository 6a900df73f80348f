"""Q_max to a stated precision: bisect between the last passing and the first failing rung.

After the coarse ladder brackets Q_max (a passing rung `lo`, a failing rung `hi` above it),
each probe holds the midpoint with the same hold and window; a pass raises `lo`, a failure
lowers `hi`, until `hi − lo` ≤ max(1 user, PCT % of `lo`). The true ceiling then lies in
[lo, hi − 1] and the artifact records `hi − lo` as `q_max_resolution`. An unbracketed ladder
is never bisected (there is no failing rung to bisect towards), and a client-bound probe ends
the refinement (it vouches for nothing), as does, with `--confidence`, a probe whose p95
interval still straddles the SLO after its hold: the bisection narrows on decided probes only. Pure arithmetic; the Locust conductor asks it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tts_bench.artifacts.qmax import ladder_outcome
from tts_bench.artifacts.rungs import Rung
from tts_bench.errors import TtsBenchError

DEFAULT_REFINE_PCT = 5.0


class RefineError(TtsBenchError):
    """A refinement setting that cannot describe a run."""


def check_refine_pct(pct: float) -> float:
    if not (math.isfinite(pct) and 0 < pct < 100):
        raise RefineError(f"--refine {pct!r}: the precision is a percentage above 0 and below 100")
    return pct


@dataclass(frozen=True, slots=True)
class Bracket:
    """Q_max lies in [lo, hi − 1]: `lo` passed, `hi` failed."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not 1 <= self.lo < self.hi:
            raise RefineError(f"bracket [{self.lo}, {self.hi}): need 1 <= lo < hi")

    @property
    def gap(self) -> int:
        return self.hi - self.lo


def coarse_bracket(rungs: Sequence[Rung]) -> Bracket | None:
    """The coarse ladder's bracket: (Q_max, the failing rung above it); None unless bracketed."""
    q_max, bracketed = ladder_outcome(list(rungs))
    if not bracketed or q_max is None:
        return None
    return Bracket(q_max, rungs[-1].concurrency)


def allowed_gap(q_max: int, pct: float) -> float:
    """The widest bracket the refinement accepts: max(1 user, pct % of Q_max)."""
    return max(1.0, pct / 100.0 * q_max)


def next_probe(bracket: Bracket, pct: float) -> int | None:
    """The next concurrency to hold, or None when the bracket is already fine enough."""
    if bracket.gap <= allowed_gap(bracket.lo, pct) + 1e-9:
        return None
    return (bracket.lo + bracket.hi) // 2


def narrow(bracket: Bracket, probe: int, passed: bool) -> Bracket:
    """The bracket after holding `probe`: a pass raises lo, a failure lowers hi."""
    if not bracket.lo < probe < bracket.hi:
        raise RefineError(
            f"probe {probe} lies outside the open bracket ({bracket.lo}, {bracket.hi})"
        )
    return Bracket(probe, bracket.hi) if passed else Bracket(bracket.lo, probe)


def worst_case_probes(bracket: Bracket, pct: float) -> int:
    """The most probes any sequence of outcomes can need from `bracket`."""
    probe = next_probe(bracket, pct)
    if probe is None:
        return 0
    return 1 + max(
        worst_case_probes(Bracket(probe, bracket.hi), pct),
        worst_case_probes(Bracket(bracket.lo, probe), pct),
    )


def worst_case_probes_for_ladder(rungs: Sequence[int], pct: float) -> int:
    """The most probes after a coarse ladder over `rungs`, whichever neighbours bracket Q_max."""
    return max(
        (worst_case_probes(Bracket(a, b), pct) for a, b in itertools.pairwise(rungs)),
        default=0,
    )
