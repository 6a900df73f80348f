"""The real ladder, headless, against a serial curve instance (tiny rungs and holds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact, ladder_outcome
from tts_bench.measure.samples import Outcome, read_samples, samples_path

pytestmark = pytest.mark.slow


def windows(artifact: QmaxArtifact) -> dict[int, tuple[float, float]]:
    """Each rung's measure window, from the ladder settings and the recorded start."""
    ladder = artifact.ladder
    return {n: ladder.measure_window(i) for i, n in enumerate(ladder.rungs)}


def test_every_rung_is_measured_from_raw_samples_in_its_window(curve_ladder: Path) -> None:
    artifact = load_artifact(curve_ladder, QmaxArtifact)
    samples = read_samples(samples_path(curve_ladder))
    assert [r.concurrency for r in artifact.rungs] == [1, 2]
    assert artifact.fingerprint.transport.value == "local-http"
    for rung, (w0, w1) in zip(artifact.rungs, windows(artifact).values(), strict=True):
        n = rung.concurrency
        assert abs(rung.client_mean_in_flight - n) <= 0.05 * n  # the client held N
        inside = [
            s for s in samples if s.rung == n and w0 <= s.end < w1 and s.outcome is Outcome.OK
        ]
        assert rung.ok == len(inside) > 0
        ttfab = [s.ttfab_ms for s in inside]
        latency = [s.latency_ms for s in inside]
        assert rung.ttfab_p50_ms == pytest.approx(np.percentile(ttfab, 50), rel=1e-12)
        assert rung.ttfab_p95_ms == pytest.approx(np.percentile(ttfab, 95), rel=1e-12)
        assert rung.ttfab_p99_ms == pytest.approx(np.percentile(ttfab, 99), rel=1e-12)
        assert rung.latency_p95_ms == pytest.approx(np.percentile(latency, 95), rel=1e-12)
        assert rung.latency_mean_ms == pytest.approx(np.mean(latency), rel=1e-12)
    assert (
        (artifact.coarse_q_max, artifact.bracketed) == (2, False) == ladder_outcome(artifact.rungs)
    )
    # the artifact's Q_max is the conservative one, whatever these short windows decided
    assert artifact.q_max_basis == "conservative" and artifact.q_max == artifact.q_max_interval.low
    # --refine was asked, but nothing failed above Q_max: no probe was held.
    assert artifact.refinement is None and artifact.q_max_resolution is None
    assert {s.rung for s in samples} <= {1, 2, None}


def test_ttfab_times_the_first_chunk_not_the_end_of_the_stream(curve_ladder: Path) -> None:
    """The first of two chunks leaves 1 ms after a request reaches the head, the second and the
    stream's end with its service (20 ms on average), after any wait: at c=1 the TTFAB is a
    few ms against about 20, and at c=2 the wait is in both."""
    ok = [s for s in read_samples(samples_path(curve_ladder)) if s.outcome is Outcome.OK]
    assert len(ok) >= 3
    ttfab = np.median([s.ttfab_ms for s in ok])
    latency = np.median([s.latency_ms for s in ok])
    assert ttfab < 0.7 * latency, f"TTFAB p50 {ttfab:.0f} ms vs latency p50 {latency:.0f} ms"
