"""The `qmax_confidence` finding: only a ladder with intervals has one, and it never moves a
deployed number."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.ladders import SOURCES, qmax_artifact, rung, ttotal_artifact
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact, Verdict
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.planning.plan import PlanRequest, derive_plan
from tts_bench.planning.report import render_plan

LEVEL = 0.95
MEASUREMENTS = Path(__file__).resolve().parents[2] / "measurements"


def _ladder(*ends: tuple[float | None, float | None]) -> list:
    # a serial server: 10 rps flat, p95 growing 600 ms a user; SLO 3000 ms
    return [
        rung(n, 10.0, 600.0 * n, interval=(lo, hi, LEVEL))
        for n, (lo, hi) in zip((1, 2, 3, 4, 5, 6), ends, strict=False)
    ]


def _plan(qmax: QmaxArtifact, rule: str):
    return derive_plan(qmax, ttotal_artifact(), PlanRequest(peak_rps=200, rule=rule), SOURCES)


def _finding(plan):
    return next((f for f in plan.findings if f.name == "qmax_confidence"), None)


@pytest.mark.parametrize("rule", ["published", "fleet"])
def test_a_plan_on_a_decided_q_max_is_ok_and_says_what_the_top_would_change(rule):
    # Q_max 4 passes on its upper end; 5 is undecided (p95 3000 ms, under the SLO); 6 fails
    ends = [(500, 700), (1100, 1300), (1700, 1900), (2200, 2500), (2900, 3200), (3300, 3900)]
    qmax = qmax_artifact(_ladder(*ends), confidence=LEVEL)
    assert (qmax.q_max, qmax.q_max_interval.low, qmax.q_max_interval.high) == (5, 4, 5)
    plan = _plan(qmax, rule)
    found = _finding(plan)
    assert found.verdict is Verdict.WARN  # the plan's 5 rests on an undecided rung
    assert (found.figure("q_max_low"), found.figure("q_max_high")) == (4, 5)
    assert found.figure("failing_above") == 6
    assert "at 4 the plan would deploy target" in found.message
    at_low = _plan(qmax.model_copy(update={"q_max": 4, "bracketed": True}), rule)
    assert found.figure("target_at_low") == at_low.scaling_target_value
    assert found.figure("max_instances_at_low") == at_low.max_instances
    # the finding moves no deployed number: the same plan without intervals deploys the same
    plain = _plan(
        qmax_artifact([rung(r.concurrency, 10.0, r.ttfab_p95_ms) for r in qmax.rungs]), rule
    )
    assert plan.scaling_target_value == plain.scaling_target_value
    assert plan.max_instances == plain.max_instances
    assert plan.queue_max_depth == plain.queue_max_depth == 5


def test_a_plan_on_the_conservative_q_max_is_ok():
    ends = [(500, 700), (1100, 1300), (1700, 1900), (2200, 2500), (2700, 2950), (3100, 3900)]
    qmax = qmax_artifact(_ladder(*ends), confidence=LEVEL)
    found = _finding(_plan(qmax, "published"))
    assert found.verdict is Verdict.OK
    assert found.figure("target_at_high") is None  # nothing above the plan's own Q_max


def test_an_undecided_rung_above_shows_the_plan_at_the_top():
    # c=6's p95 (3600 ms) misses the SLO, so Q_max is 5, but its interval reaches under it
    ends = [(500, 700), (1100, 1300), (1700, 1900), (2200, 2500), (2700, 2950), (2900, 3900)]
    qmax = qmax_artifact(_ladder(*ends), confidence=LEVEL)
    assert (qmax.q_max, qmax.q_max_interval.high, qmax.q_max_interval.failing_above) == (5, 6, None)
    plan = _plan(qmax, "published")
    found = _finding(plan)
    assert found.verdict is Verdict.OK
    assert found.figure("max_instances_at_high") is not None
    assert "at 6 the plan would deploy" in found.message and "no rung above failed" in found.message
    assert "Q_max interval [5, 6] at 95%" in render_plan(plan, qmax, ttotal_artifact())


def test_the_reference_ladder_predates_the_interval_and_its_plan_has_no_such_finding():
    qmax = load_artifact(
        MEASUREMENTS / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json", QmaxArtifact
    )
    assert qmax.q_max_interval is None
    plan = load_artifact(MEASUREMENTS / "plan-kokoro-82m-g5xlarge-8b1b96bc.json", PlanArtifact)
    assert _finding(plan) is None
    assert "Q_max interval unknown" in render_plan(plan, qmax, ttotal_artifact())
