"""A committed ladder judged again with p95 intervals (issue 38), from its own samples.

A ladder measured before the intervals existed keeps every recorded figure; each rung and
refinement probe gains its p95 TTFAB interval at `level` and the verdict on it, from the
requests that ended in its recorded window, and the artifact gains Q_max's interval. The
client CPU share each rung recorded is taken as recorded (older ladders kept no readings).
Nothing here writes: `tts-bench interval` prints the result.
"""

from __future__ import annotations

from collections.abc import Sequence

from tts_bench.artifacts.qmax import (
    QmaxArtifact,
    Refinement,
    q_max_interval_of,
    q_max_on_basis,
    repeats_of,
)
from tts_bench.artifacts.rungs import Rung
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder.statistics import rung_from_window
from tts_bench.measure.samples import Sample


class ReanalysisError(TtsBenchError):
    """A ladder whose windows cannot be found again."""


def _judged(
    rung: Rung, samples: Sequence[Sample], window: tuple[float, float], qmax: QmaxArtifact,
    level: float,
) -> Rung:  # fmt: skip
    underrun = qmax.ladder.underrun_slo_share if qmax.ladder else None
    again = rung_from_window(
        samples, rung.concurrency, window, qmax.slo_ms, underrun, rung.client_cpu_percent, level
    )
    return rung.model_copy(
        update={"ttfab_p95_interval": again.ttfab_p95_interval, "verdict": again.verdict}
    )


def _rejudged(
    refinement: Refinement, samples: Sequence[Sample], qmax: QmaxArtifact, level: float
) -> Refinement:
    probes = [
        p.model_copy(
            update={
                "rung": _judged(
                    p.rung, samples, (p.window_start_epoch, p.window_end_epoch), qmax, level
                )
            }
        )
        for p in refinement.probes
    ]
    # A probe decided at one level may be undecided at another: the bracket is what the decided
    # probes give, as the artifact's validator derives it.
    decided = [p.rung for p in probes if p.rung.usable and p.rung.verdict != "undecided"]
    coarse_q_max, failing = qmax.coarse_q_max or 0, qmax.coarse_failing_above or 0
    q_max = max([coarse_q_max, *(r.concurrency for r in decided if r.meets_slo)])
    above = min([failing, *(r.concurrency for r in decided if not r.meets_slo)])
    return refinement.model_copy(
        update={
            "probes": probes,
            "q_max": q_max,
            "failing_above": above,
            "q_max_resolution": above - q_max,
        }
    )


def with_intervals(qmax: QmaxArtifact, samples: Sequence[Sample], level: float) -> QmaxArtifact:
    """`qmax` with every rung's p95 interval at `level`, its verdict and Q_max's interval."""
    ladder = qmax.ladder
    if ladder is None or ladder.start_epoch is None:
        raise ReanalysisError("ladder.start_epoch is not recorded, so no rung's window is known")
    rungs = [
        _judged(r, samples, ladder.measure_window(i), qmax, level) for i, r in enumerate(qmax.rungs)
    ]
    refinements = [_rejudged(r, samples, qmax, level) for r in qmax.refinements]
    refinement = refinements[0] if refinements else None
    curve = [*rungs, *(p.rung for p in refinement.probes)] if refinement else rungs
    interval = q_max_interval_of(sorted(curve, key=lambda r: r.concurrency), level)
    repeats = repeats_of(rungs, refinements, level)
    judged = qmax.model_copy(
        update={
            "rungs": rungs,
            "refinement": refinement,
            "ladder": ladder.model_copy(update={"confidence": level}),
            "q_max": q_max_on_basis(qmax.q_max_basis, rungs, interval, repeats),
            "q_max_interval": interval,
            "repeats": repeats,
        }
    )
    # validated again: the verdicts and Q_max's interval must be what the schema derives
    return QmaxArtifact.model_validate(judged.model_dump(mode="json"))
