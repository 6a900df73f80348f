"""Refinement: bisection against a deterministic stand-in curve, and never without a bracket."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rungs import Rung
from tts_bench.measure.ladder.refine import (
    Bracket,
    RefineError,
    allowed_gap,
    check_refine_pct,
    coarse_bracket,
    narrow,
    next_probe,
    worst_case_probes,
)
from tts_bench.measure.ladder.schedule import LadderError, LadderSchedule
from tts_bench.measure.ladder.statistics import build_refinement


def stand_in_p95_ms(concurrency: int) -> float:
    """A deterministic TTFAB curve: flat service, then a queue that grows with concurrency."""
    return 400.0 + 37.0 * concurrency


def rung(concurrency: int, passes: bool, usable: bool = True) -> Rung:
    """A rung whose p95 TTFAB agrees with its verdict at a 3000 ms SLO."""
    return Rung(
        concurrency=concurrency, achieved_rps=1.0, ttfab_p50_ms=1.0,
        ttfab_p95_ms=1.0 if passes else 5000.0, ttfab_p99_ms=5000.0, latency_mean_ms=1.0, latency_p95_ms=1.0, completed=10, ok=10,
        rejected=0, errors=0, client_mean_in_flight=float(concurrency), cloudwatch_ratio=None,
        meets_slo=passes, usable=usable, unusable_reason=None if usable else "client-bound",
    )  # fmt: skip


def refine(bracket: Bracket, pct: float, passes) -> tuple[Bracket, list[int]]:
    """The conductor's loop without Locust: probe, judge, narrow, until next_probe says stop."""
    probes = []
    while (probe := next_probe(bracket, pct)) is not None:
        probes.append(probe)
        bracket = narrow(bracket, probe, passes(probe))
    return bracket, probes


@given(
    lo=st.integers(1, 400),
    width=st.integers(1, 400),
    share=st.floats(0, 1, exclude_max=True),
    pct=st.floats(0.5, 50),
)
def test_lands_inside_the_true_bracket_within_the_resolution(lo, width, share, pct):
    hi = lo + width
    # An SLO that puts the stand-in curve's true Q_max somewhere in [lo, hi − 1].
    true_q = lo + int(share * width)
    slo_ms = (stand_in_p95_ms(true_q) + stand_in_p95_ms(true_q + 1)) / 2
    final, probes = refine(Bracket(lo, hi), pct, lambda c: stand_in_p95_ms(c) <= slo_ms)
    assert final.lo <= true_q < final.hi  # the true ceiling is inside the final bracket
    assert final.gap <= allowed_gap(final.lo, pct) + 1e-9  # to the asked resolution
    assert len(probes) == len(set(probes)) <= worst_case_probes(Bracket(lo, hi), pct)
    assert all(lo < p < hi for p in probes)


def test_the_h200_bracket_128_160_at_5_percent():
    """The run that motivated the issue: 128 passes, 160 fails; 5 % of ~128 is 6.4 users."""
    final, probes = refine(Bracket(128, 160), 5.0, lambda c: c <= 141)
    assert probes == [144, 136, 140]
    assert (final.lo, final.hi) == (140, 144) and final.gap <= 0.05 * 140


@given(st.lists(st.sampled_from(["pass", "fail", "unusable"]), min_size=1, max_size=8))
def test_never_bisects_when_the_ladder_did_not_bracket(outcomes):
    rungs = [
        rung(10 * (i + 1), o == "pass", usable=o != "unusable") for i, o in enumerate(outcomes)
    ]
    # The ladder stops after its first non-pass, as the real one does.
    end = next((i for i, o in enumerate(outcomes) if o != "pass"), len(outcomes) - 1)
    rungs = rungs[: end + 1]
    bracketed = outcomes[end] == "fail" and end > 0
    bracket = coarse_bracket(rungs)
    assert (bracket is not None) == bracketed
    if not bracketed:
        with pytest.raises(LadderError):
            build_refinement(rungs, [], 5.0, "resolution")


@pytest.mark.parametrize("pct", [0.0, -1.0, 100.0, float("nan"), float("inf")])
def test_a_precision_outside_0_100_is_refused(pct):
    with pytest.raises(RefineError):
        check_refine_pct(pct)


def test_a_probe_outside_the_bracket_is_refused():
    with pytest.raises(RefineError):
        narrow(Bracket(4, 8), 8, passed=True)


def test_the_artifact_refuses_a_refinement_that_disagrees_with_its_probes(tmp_path):
    from tts_bench.artifacts.provenance import Provenance
    from tts_bench.artifacts.qmax import RefinementProbe
    from tts_bench.measure.ladder.statistics import build_qmax_artifact

    coarse = [rung(1, True), rung(8, False)]
    probes = [RefinementProbe(rung=rung(4, True), window_start_epoch=0, window_end_epoch=1)]
    refinement = build_refinement(coarse, probes, 5.0, "interrupted")
    assert (refinement.q_max, refinement.failing_above, refinement.q_max_resolution) == (4, 8, 4)
    artifact = build_qmax_artifact(
        coarse, None, LadderSchedule((1, 8), 10, 5, 1), 3000.0,
        Provenance.now("measured", "test"), refinement=refinement,
    )  # fmt: skip
    assert (artifact.q_max, artifact.refined_q_max, artifact.q_max_resolution) == (1, 4, 4)
    assert [r.concurrency for r in artifact.curve_rungs] == [1, 4, 8]
    data = artifact.model_dump(mode="json")
    data["refinement"]["q_max"] = 5
    data["refinement"]["q_max_resolution"] = 3
    with pytest.raises(ValueError, match="its probes give 4 below 8"):
        QmaxArtifact.model_validate(data)


def test_dry_run_shows_the_worst_case_time(capsys):
    from tts_bench.cli import main

    assert main(["qmax", "--dry-run", "--rungs", "1,5,10", "--hold-s", "20", "--measure-s",
                 "10", "--idle-s", "5", "--refine", "10"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    # Worst bracket 5–10 at 10 % (gap 1 needed): 7 passes, 8 passes, 9 → 3 probes of 20 + 5 s.
    assert worst_case_probes(Bracket(5, 10), 10.0) == 3 > worst_case_probes(Bracket(1, 5), 10.0)
    assert "at most 3 probes of 20 s, 1 min 15 s more; worst case in all 2 min 30 s" in out
