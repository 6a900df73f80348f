"""The real ladder with --refine against a serial curve instance: probes, playback,
recomputation.

One run (the session's `refined_curve_ladder`, see conftest) serves every assertion: its true
Q_max is 1 by arithmetic (`curve_truth`), c=8 fails, the refinement bisects 1–8 to one user,
and each stream's second chunk leaves when its service ends, so the streams whose service
outlasts the first chunk's 20 ms of audio stall.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.local_cloud.instances.curve_truth import true_q_max
from tts_bench.measure.ladder.statistics import rung_statistics
from tts_bench.measure.samples import Outcome, read_samples, samples_path

from .conftest import CURVE_FIRST_CHUNK_MS, REFINED_RATE_RPS, REFINED_SLO_MS

pytestmark = pytest.mark.slow


def test_refinement_bisects_the_bracket_to_one_user(refined_curve_ladder: Path) -> None:
    truth = true_q_max(REFINED_RATE_RPS, REFINED_SLO_MS, CURVE_FIRST_CHUNK_MS)
    assert truth == 1
    artifact = load_artifact(refined_curve_ladder, QmaxArtifact)
    assert [r.concurrency for r in artifact.rungs] == [1, 8]
    assert (artifact.coarse_q_max, artifact.bracketed) == (1, True)
    # The artifact's Q_max is the conservative one: c=1's 3 s window finishes about 75 requests,
    # at the edge of the 72 its p95 interval needs for an upper end, so it may stay undecided.
    assert artifact.q_max_basis == "conservative"
    assert artifact.q_max == artifact.refined_q_max == artifact.q_max_interval.low
    assert artifact.q_max in (None, truth)
    refinement = artifact.refinement
    assert refinement is not None
    levels = [p.rung.concurrency for p in refinement.probes]
    # Every rung's verdict is decided by a wide margin (conftest, REFINED_SLO_MS): the
    # bisection halves 1–8 at 4, then 1–4 at 2, both failing, and ends at one user.
    assert levels == [4, 2] and not any(p.rung.passes for p in refinement.probes)
    assert [p.rung.verdict for p in refinement.probes] == ["fail", "fail"]
    assert refinement.ended_by == "resolution"
    assert refinement.q_max == truth
    assert refinement.q_max_resolution == refinement.failing_above - refinement.q_max == 1
    # The plan's curve holds both kinds of rungs; the coarse list is left as measured.
    assert [r.concurrency for r in artifact.curve_rungs] == sorted([1, 8, *levels])


def test_refinement_rungs_recompute_from_the_samples(refined_curve_ladder: Path) -> None:
    artifact = load_artifact(refined_curve_ladder, QmaxArtifact)
    samples = read_samples(samples_path(refined_curve_ladder))
    assert artifact.refinement is not None and artifact.refinement.probes
    for probe in artifact.refinement.probes:
        window = (probe.window_start_epoch, probe.window_end_epoch)
        again = rung_statistics(
            samples, [], probe.rung.concurrency, window, artifact.slo_ms,
            confidence=artifact.ladder.confidence,
        )  # fmt: skip
        kept = probe.rung.model_dump(exclude={"client_cpu_percent", "usable", "unusable_reason"})
        assert again.model_dump(exclude={"client_cpu_percent", "usable", "unusable_reason"}) == kept


def test_past_saturation_some_streams_stall(refined_curve_ladder: Path) -> None:
    """Rungs past saturation (they miss the SLO): some streams stalled and some did not. A
    stream stalls when its service outlasts the first chunk's 1 ms + 20 ms of audio, which an
    Exp(25/s) service does in about 59 % of requests; the 41 % served sooner never stall."""
    artifact = load_artifact(refined_curve_ladder, QmaxArtifact)
    saturated = [
        r
        for r in artifact.curve_rungs
        if r.usable and not r.meets_slo and r.underrun_share is not None
    ]
    assert [r.concurrency for r in saturated] == [2, 4, 8]
    assert all(0 < r.underrun_share < 1 for r in saturated), [r.underrun_share for r in saturated]
    worst = max(saturated, key=lambda r: r.underrun_share)
    assert worst.stall_ms_p95 is not None and worst.stall_ms_p95 > 0
    assert worst.rtf_p50 is not None and worst.rtf_p95 >= worst.rtf_p50 > 0
    # Audio durations come from chunk lengths: two chunks of 20 ms each, in every stream.
    samples = read_samples(samples_path(refined_curve_ladder))
    heard = [s.audio_ms for s in samples if s.outcome is Outcome.OK]
    assert heard and all(ms == pytest.approx(40.0) for ms in heard), sorted(set(heard))
    assert [len(r.sub_window_ttfab_p95_ms) for r in artifact.rungs] == [3, 3]
