"""The plan uses the refined Q_max and warns when Q_max rests on an unstable rung."""

from __future__ import annotations

import pytest

from tts_bench.artifacts.plan import Verdict
from tts_bench.artifacts.qmax import RefinementProbe
from tts_bench.measure.ladder.statistics import build_refinement
from tts_bench.planning.plan import PlanRequest, derive_plan

from ..core.ladders import SOURCES, qmax_artifact, rung, ttotal_artifact


def refined_ladder(probe_stable: bool | None):
    # Coarse: 1, 20 and 40 pass, 60 fails; probes at 50 (fails) and 45 (passes).
    coarse = [rung(1, 10, 100), rung(20, 10, 2000), rung(40, 10, 2900), rung(60, 10, 4000)]
    probes = [
        rung(50, 10, 3100),
        rung(45, 10, 2950).model_copy(
            update={"stable": probe_stable, "sub_window_ttfab_p95_ms": [2700.0, 2950.0, 3400.0]}
        ),
    ]
    artifact = qmax_artifact(coarse)
    refinement = build_refinement(
        coarse,
        [RefinementProbe(rung=r, window_start_epoch=0, window_end_epoch=1) for r in probes],
        5.0,
        "interrupted",
    )
    return artifact.model_copy(update={"refinement": refinement})


@pytest.mark.parametrize(
    ("stable", "verdict"), [(True, Verdict.OK), (False, Verdict.WARN), (None, None)]
)
def test_plan_uses_the_refined_q_max_and_judges_its_rung_stability(stable, verdict):
    qmax = refined_ladder(stable)
    assert (qmax.q_max, qmax.refined_q_max, qmax.q_max_resolution) == (40, 45, 5)
    plan = derive_plan(
        qmax, ttotal_artifact(), PlanRequest(peak_rps=100, rule="published"), SOURCES
    )
    assert plan.queue_max_depth == plan.inputs.q_max == 45
    assert plan.c_scale_max == pytest.approx(0.75 * 45)
    found = plan.finding("stability")
    assert (found and found.verdict) is verdict  # an unjudged ladder has no stability finding
