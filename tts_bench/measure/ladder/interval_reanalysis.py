"""A committed ladder judged again with p95 intervals (issue 38), from its own samples.

A ladder measured before the intervals existed keeps every recorded figure; each rung and
refinement probe gains its p95 TTFAB interval at `level` and the verdict on it, from the
requests that ended in its recorded window, and the artifact gains Q_max's interval. The
client CPU share each rung recorded is taken as recorded (older ladders kept no readings).
Nothing here writes: `tts-bench interval` prints the result.
"""

from __future__ import annotations

from collections.abc import Sequence

from tts_bench.artifacts.qmax import QmaxArtifact, q_max_interval_of
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


def with_intervals(qmax: QmaxArtifact, samples: Sequence[Sample], level: float) -> QmaxArtifact:
    """`qmax` with every rung's p95 interval at `level`, its verdict and Q_max's interval."""
    ladder = qmax.ladder
    if ladder is None or ladder.start_epoch is None:
        raise ReanalysisError("ladder.start_epoch is not recorded, so no rung's window is known")
    rungs = [
        _judged(r, samples, ladder.measure_window(i), qmax, level) for i, r in enumerate(qmax.rungs)
    ]
    refinement = qmax.refinement
    if refinement is not None:
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
        refinement = refinement.model_copy(update={"probes": probes})
    curve = [*rungs, *(p.rung for p in refinement.probes)] if refinement else rungs
    judged = qmax.model_copy(
        update={
            "rungs": rungs,
            "refinement": refinement,
            "ladder": ladder.model_copy(update={"confidence": level}),
            "q_max_interval": q_max_interval_of(sorted(curve, key=lambda r: r.concurrency), level),
        }
    )
    # validated again: the verdicts and Q_max's interval must be what the schema derives
    return QmaxArtifact.model_validate(judged.model_dump(mode="json"))
