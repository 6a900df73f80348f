"""Thresholds in CloudWatch units (SPEC §6): where the ratio comes from, which
statistic each threshold is in, and the findings that stop a plan in the wrong units."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.core.ladders import (
    FINGERPRINT,
    SOURCES,
    qmax_artifact,
    rung,
    serial_ladder,
    ttotal_artifact,
)
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.plan import Verdict
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rungs import Rung, VerificationRung
from tts_bench.deployment import SCALE_IN_PERIOD_S, SCALE_IN_STATISTIC
from tts_bench.errors import ArtifactError
from tts_bench.planning.curve import conservative_ratio
from tts_bench.planning.plan import (
    PlanRequest,
    check_basis,
    derive_plan,
    derive_thresholds,
)
from tts_bench.planning.report import render_plan

SAGEMAKER = FINGERPRINT.model_copy(update={"transport": Transport.RESPONSE_STREAM})
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REQUEST = PlanRequest(peak_rps=100, trough_rps=5, surge_trials=20, rule="published")


def sagemaker_plan(rungs: list[Rung], *, verification=(), request: PlanRequest = REQUEST):
    qmax = qmax_artifact(rungs, fingerprint=SAGEMAKER).model_copy(
        update={"verification": list(verification)}
    )
    return derive_plan(qmax, ttotal_artifact(fingerprint=SAGEMAKER), request, SOURCES)


def thresholds_for(qmax: QmaxArtifact, request: PlanRequest = REQUEST):
    """Only the threshold step: no surge simulation, so hypothesis can try many ladders."""
    basis = check_basis(qmax, ttotal_artifact(fingerprint=qmax.fingerprint), request)
    return derive_thresholds(basis, request, qmax)


# --------------------------------------------------------------------------- the ratio rule


@st.composite
def convex_falling_ladders(draw):
    """A serial ladder whose CloudWatch ratio r(c) = a + b·exp(−k·c) falls convexly with load,
    with the true curve for checking."""
    levels = sorted(set(draw(st.lists(st.integers(2, 120), min_size=2, max_size=7))) | {1})
    a = draw(st.floats(0.5, 1.2))
    b = draw(st.floats(0.0, 1.5))
    k = draw(st.floats(0.005, 0.5))

    def ratio(c: float) -> float:
        return a + b * math.exp(-k * c)

    service_ms = 3000 / (max(levels) * draw(st.floats(0.3, 1.5)))
    rungs = [rung(n, 1000 / service_ms, service_ms * n, cw=ratio(n)) for n in levels]
    return rungs, ratio


@FAST
@given(convex_falling_ladders(), st.floats(1.01, 1.49))
def test_the_target_is_never_above_the_true_curve_nor_the_chord(ladder, surge) -> None:
    rungs, true_ratio = ladder
    qmax = qmax_artifact(rungs, fingerprint=SAGEMAKER)
    assume(qmax.q_max is not None and qmax.q_max > 1)
    request = REQUEST.model_copy(update={"surge_ratio": surge})
    t = thresholds_for(qmax, request)
    xs = [float(r.concurrency) for r in rungs]
    ys = [float(r.cloudwatch_ratio) for r in rungs]  # type: ignore[arg-type]
    for at, value in (
        (t.c_scale_max, t.scaling_target_value),
        (t.c_scale_min, t.scale_in_threshold),
    ):
        rule = conservative_ratio(list(zip(xs, ys, strict=True)), at)
        assert rule is not None
        assert value == pytest.approx(
            at * rule.ratio, abs=1e-8
        )  # the measured-or-conservative rule
        # A falling curve: the smaller bracketing rung is the one above, at or below the truth;
        # beyond the last rung the nearest one is above the truth, which no rule can know.
        if at <= xs[-1]:
            assert value <= at * true_ratio(at) + 1e-8
        # The chord over a convex curve lies above it: never above what interpolation gave.
        assert value <= at * float(np.interp(at, xs, ys)) + 1e-8


def test_the_issue_fixture_no_longer_fires_late() -> None:
    """Rungs 40 and 50 read ×1.62 and ×1.35: the chord gave 37.5 × 1.5525 = 58.2; the smaller
    bracketing rung gives 37.5 × 1.35."""
    rungs = [
        rung(1, 10, 100, cw=2.0),
        rung(20, 18, 1100, cw=1.8),
        rung(30, 18, 1700, cw=1.7),
        rung(40, 18, 2200, cw=1.62),
        rung(50, 18, 2800, cw=1.35),
        rung(60, 18, 3400, cw=1.3),
    ]
    plan = sagemaker_plan(rungs)
    assert plan.c_scale_max == 37.5
    assert plan.scaling_target_value == pytest.approx(37.5 * 1.62)  # rungs 30 and 40: smaller 1.62
    assert plan.target_units.ratio_rule == "smaller-bracketing"
    finding = plan.finding("cw_ratio")
    assert (
        finding is not None
        and "smaller-bracketing: the smaller of rungs 30 and 40" in finding.message
    )


def _verified(role: str, users: int, ratio: float, surge: float = 1.25) -> VerificationRung:
    return VerificationRung(
        role=role,  # type: ignore[arg-type]
        surge_ratio=surge,
        concurrency=users,
        achieved_rps=10.0,
        ttfab_p95_ms=100.0,
        client_mean_in_flight=float(users),
        cloudwatch_ratios={f"{SCALE_IN_STATISTIC}/{SCALE_IN_PERIOD_S}s": ratio},
        usable=True,
    )


def test_a_verification_rung_is_the_measurement_at_its_threshold() -> None:
    rungs = serial_ladder((1, 5, 10, 20, 30, 40, 50, 60), service_ms=55, cw=1.0)  # Q_max 50
    plan = sagemaker_plan(
        rungs, verification=[_verified("scale_out", 38, 0.9), _verified("scale_in", 25, 0.95)]
    )
    assert (plan.target_units.cw_ratio, plan.target_units.ratio_rule) == (0.9, "verification-rung")
    assert (plan.scale_in_units.cw_ratio, plan.scale_in_units.ratio_rule) == (
        0.95,
        "verification-rung",
    )
    assert plan.scaling_target_value == pytest.approx(plan.c_scale_max * 0.9)


def test_verification_at_another_surge_ratio_is_only_a_point() -> None:
    rungs = serial_ladder((1, 5, 10, 20, 30, 40, 50, 60), service_ms=55, cw=1.0)  # Q_max 50
    plan = sagemaker_plan(rungs, verification=[_verified("scale_out", 38, 0.9, surge=1.3)])
    # 37.5 lies between rung 30 (1.0) and the point held at 38 (0.9): the smaller is 0.9.
    assert (plan.target_units.cw_ratio, plan.target_units.ratio_rule) == (0.9, "smaller-bracketing")


# --------------------------------------------------------------------------- findings


def test_unmeasured_ratio_on_sagemaker_stops_and_names_the_fix() -> None:
    plan = sagemaker_plan(serial_ladder(service_ms=50))
    finding = plan.finding("cw_ratio")
    assert not plan.feasible and finding is not None and finding.verdict is Verdict.STOP
    assert "re-run the ladder with the CloudWatch join" in finding.message
    assert plan.target_units.ratio_rule == "unmeasured"


def test_local_transport_is_one_by_construction_and_says_so() -> None:
    qmax = qmax_artifact(serial_ladder(service_ms=50))
    ttotal = ttotal_artifact()
    plan = derive_plan(qmax, ttotal, REQUEST, SOURCES)
    finding = plan.finding("cw_ratio")
    assert finding is not None and finding.verdict is Verdict.OK
    assert plan.target_units.ratio_rule == plan.scale_in_units.ratio_rule == "local-no-cloudwatch"
    assert plan.scaling_target_value == plan.c_scale_max
    report = render_plan(plan, qmax, ttotal)
    assert "local: no CloudWatch" in report and "measured 1.0" not in report


def test_a_scale_in_threshold_crossing_the_target_stops() -> None:
    """CloudWatch reads ×1.62 the client's concurrency at low load and ×1.0 at high load:
    25 × 1.62 = 40.5 lies above the target 37.5, and the fleet would flap."""
    rungs = [
        rung(n, 18, 60 * n, cw=1.62 if n <= 25 else 1.0) for n in (1, 10, 20, 25, 30, 40, 50, 60)
    ]
    plan = sagemaker_plan(rungs)
    assert plan.scale_in_threshold > plan.scaling_target_value
    order = plan.finding("threshold_order")
    assert order is not None and order.verdict is Verdict.STOP and "not below" in order.message
    assert not plan.feasible


def test_a_scale_in_threshold_closer_than_the_surge_ratio_stops() -> None:
    rungs = [
        rung(n, 18, 60 * n, cw=1.3 if n <= 25 else 1.0) for n in (1, 10, 20, 25, 30, 40, 50, 60)
    ]
    plan = sagemaker_plan(rungs)  # 25 × 1.3 = 32.5, × 1.25 = 40.6 ≥ 37.5
    order = plan.finding("threshold_order")
    assert plan.scale_in_threshold < plan.scaling_target_value
    assert order is not None and order.verdict is Verdict.STOP and "too close to" in order.message


def test_w_max_below_one_service_time_warns() -> None:
    roomy = derive_plan(
        qmax_artifact(serial_ladder(service_ms=100)), ttotal_artifact(), REQUEST, SOURCES
    )
    assert roomy.finding("slo_budget").verdict is Verdict.OK  # type: ignore[union-attr]
    # S_p95 = 1.734 s at c=1 against a 3.3 s SLO: W_max = 1.566 s, less than one service time.
    rungs = [rung(1, 1, 1700, slo_ms=3300), rung(2, 1, 3400, slo_ms=3300)]
    plan = derive_plan(
        qmax_artifact(rungs, slo_ms=3300),
        ttotal_artifact(),
        REQUEST.model_copy(update={"slo_ms": 3300}),
        SOURCES,
    )
    budget = plan.finding("slo_budget")
    assert plan.w_max_s == pytest.approx(1.566)
    assert budget is not None and budget.verdict is Verdict.WARN
    assert "less than one uncontended request's p95" in budget.message
    assert plan.feasible  # a warning, not a stop


# --------------------------------------------------------------------------- the qmax schema


@pytest.mark.parametrize(
    ("concurrency", "meets_slo", "expected"),
    [
        (60, True, "rung 60: meets_slo=True disagrees with its p95 TTFAB"),
        (5, False, "rung 5: meets_slo=False disagrees with its p95 TTFAB"),
    ],
)
def test_a_hand_edited_verdict_is_rejected(
    reference_qmax_path: Path, tmp_path: Path, concurrency: int, meets_slo: bool, expected: str
) -> None:
    data = json.loads(reference_qmax_path.read_text())
    for r in data["rungs"]:
        if r["concurrency"] == concurrency:
            r["meets_slo"] = meets_slo
    broken = tmp_path / "qmax.json"
    broken.write_text(json.dumps(data))
    with pytest.raises(ArtifactError) as info:
        load_artifact(broken, QmaxArtifact)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_the_reference_ladder_still_loads(reference_qmax_path: Path) -> None:
    qmax = load_artifact(reference_qmax_path, QmaxArtifact)
    assert qmax.verification == [] and all(r.cloudwatch_ratio == 1.0 for r in qmax.rungs)
