"""The fleet rule (SPEC §6a): levels in load per instance, deployed on a load-linear metric.

Figures are stated through the rule's own arithmetic (X(Q_max), the margin, AWS's 90 % low
alarm) rather than copied, so a test fails when the arithmetic moves and not when a constant is
tuned; the committed plans are compared whole with what `plan` derives today.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.core.ladders import FINGERPRINT, SOURCES, qmax_artifact, rung, ttotal_artifact
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.plan import PlanArtifact, StepSpec, TargetTrackingSpec
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.cli import main
from tts_bench.planning import fleet_rule
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.birth_death import pooled_stationary, stationary_occupancy
from tts_bench.planning.curve import throughput_curve
from tts_bench.planning.deploy import deploy_shape_of
from tts_bench.planning.plan import derive_plan
from tts_bench.planning.steps import PlanRequest

HERE = Path(__file__).resolve().parent
V1_PLAN = HERE / "fixtures" / "plan-v1-reference.json"
SAGEMAKER = FINGERPRINT.model_copy(update={"transport": Transport.RESPONSE_STREAM})
INVOCATIONS_KEY = fleet_rule.INVOCATIONS_STAT.key


@pytest.fixture(scope="module")
def fleet_plan_path(reference_plan_path: Path) -> Path:
    return reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"


@pytest.fixture
def derived(tmp_path, capsys, monkeypatch, repo_root, reference_qmax_path, reference_ttotal_path):
    """`plan` on the reference artifacts with the default rule, as docs/artifacts.md types it."""
    monkeypatch.chdir(repo_root)
    code = main(
        [
            "plan", "--qmax", str(reference_qmax_path.relative_to(repo_root)),
            "--ttotal", str(reference_ttotal_path.relative_to(repo_root)),
            "--peak-rps", "5000", "--trough-rps", "10", "--json", "--out", str(tmp_path),
        ]
    )  # fmt: skip
    assert code == 0
    assert [p.name for p in tmp_path.iterdir()] == ["plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"]
    return PlanArtifact.model_validate(json.loads(capsys.readouterr().out))


def test_the_fleet_rule_states_its_levels_in_load_per_instance(derived: PlanArtifact) -> None:
    plan, levels = derived, derived.fleet
    assert plan.rule == "fleet" and plan.feasible and levels is not None
    day_growth = (5000 - 10) / (5000 + 10) * 2 * math.pi / 86_400 * levels.planned_total_s
    assert levels.margin == pytest.approx(max(fleet_rule.FLEET_MARGIN_FLOOR, day_growth))
    assert levels.scale_out_rps == pytest.approx(
        levels.x_q_max_rps * (1 - levels.margin) / 1.25, abs=1e-8
    )
    # The surge headroom: a ×1.25 surge at λ_out stays below X(Q_max) by the margin.
    assert 1.25 * levels.scale_out_rps <= levels.x_q_max_rps * (1 - levels.margin) + 1e-8
    assert levels.scale_in_rps == pytest.approx(0.9 * levels.scale_out_rps)
    assert plan.scaling_target_value == pytest.approx(60 * levels.scale_out_rps, abs=1e-6)
    # The step scale-in reads the load with one instance fewer, at the target itself.
    assert plan.scale_in_threshold == plan.scaling_target_value
    assert levels.planned_total_s == pytest.approx(260.2 + 3 * 60 + 60)
    assert plan.scale_out_cooldown_s == math.ceil(levels.planned_total_s)
    assert (plan.min_instances, plan.max_instances) == (
        1, math.ceil(5000 / levels.scale_out_rps),
    )  # fmt: skip
    assert plan.target_units.metric == "InvocationsPerInstance"
    assert plan.target_units.ratio_rule == "by-definition"


def test_c_scale_max_is_what_one_instance_holds_at_lambda_out(
    derived: PlanArtifact, reference_qmax_path: Path
) -> None:
    from tts_bench.artifacts.qmax import QmaxArtifact

    curve = throughput_curve(load_artifact(reference_qmax_path, QmaxArtifact).curve_rungs)
    levels = derived.fleet
    assert levels is not None
    assert derived.c_scale_max == pytest.approx(
        stationary_occupancy(levels.scale_out_rps, curve.at, 50), abs=1e-8
    )
    assert derived.c_scale_min < derived.c_scale_max < 50


def test_the_deploy_shape_is_target_tracking_on_invocations_and_a_burst_step(
    derived: PlanArtifact, reference_qmax_path: Path
) -> None:
    from tts_bench.artifacts.qmax import QmaxArtifact

    curve = throughput_curve(load_artifact(reference_qmax_path, QmaxArtifact).curve_rungs)
    tracking, scale_in, burst = deploy_shape_of(derived).policies
    assert isinstance(tracking, TargetTrackingSpec) and isinstance(burst, StepSpec)
    assert tracking.predefined_metric == "SageMakerVariantInvocationsPerInstance"
    # Target tracking keeps its own scale-in: the one small fleets get.
    assert tracking.disable_scale_in is False
    _, low = aws_scaling.tracking_alarms(tracking.predefined_metric, tracking.target_value, False)
    assert (tracking.high_alarm.period_s, tracking.high_alarm.datapoints_to_alarm) == (60, 3)
    assert low is not None and tracking.low_alarm is not None
    assert tracking.low_alarm.threshold == pytest.approx(low.threshold)
    assert tracking.low_alarm.threshold == pytest.approx(0.9 * tracking.target_value)
    assert (tracking.low_alarm.evaluation_periods, tracking.low_alarm.period_s) == (15, 60)
    # Large fleets scale in on the metric-math alarm: one instance fewer below the target for
    # three minutes removes k % where that is k % below it; its cooldown is AWS's default 300 s,
    # above its own detection (3 datapoints and a minute's publication), and target tracking's.
    assert isinstance(scale_in, StepSpec) and scale_in.role == "scale-in"
    alarm = scale_in.alarm
    assert alarm.after_one_less is not None
    assert alarm.after_one_less.min_fleet == fleet_rule.FLEET_SCALE_IN_MIN_FLEET == 20
    assert (alarm.metric, alarm.statistic, alarm.period_s) == ("InvocationsPerInstance", "Sum", 60)
    assert (alarm.evaluation_periods, alarm.datapoints_to_alarm) == (3, 3)
    assert alarm.comparison == "LessThanThreshold" and alarm.threshold == tracking.target_value
    assert scale_in.adjustment_type == "PercentChangeInCapacity"
    assert [s.adjustment for s in scale_in.steps] == list(range(-1, -51, -1))
    assert scale_in.steps[0].upper == 0 and scale_in.steps[-1].lower is None
    assert scale_in.steps[9].lower == pytest.approx(-0.10 * tracking.target_value)
    assert scale_in.cooldown_s == derived.scale_in_cooldown_s == 300 > 3 * 60 + 60
    assert tracking.scale_in_cooldown_s == scale_in.cooldown_s
    assert burst.role == "burst" and burst.adjustment_type == "PercentChangeInCapacity"
    assert burst.alarm.metric == "ConcurrentRequestsPerModel" and burst.alarm.period_s == 10
    levels = derived.fleet
    assert levels is not None and levels.burst is not None
    assert burst.steps[0].adjustment == math.ceil(
        100 * (levels.x_q_max_rps / levels.scale_out_rps - 1) - 1e-9
    )
    # A serial engine's burst fires at what one instance holds at λ_out (a pooled fleet reads
    # less there), and takes a fleet of one to four at least.
    assert burst.alarm.threshold == pytest.approx(derived.c_scale_max, abs=1e-6)
    assert burst.min_adjustment_magnitude == fleet_rule.FLEET_BURST_MIN_INSTANCES == 3
    # From what one instance holds under the surge (a fleet on its way to shedding), the 30 %
    # again on top: a second push within the first step's cooldown.
    first, second = burst.steps
    saturation = stationary_occupancy(1.25 * levels.scale_out_rps, curve.at, 50)
    assert (
        first.upper == second.lower == pytest.approx(saturation - burst.alarm.threshold, abs=1e-6)
    )
    assert second.upper is None and second.adjustment == 69  # 1.3² − 1
    assert derived.deploy is not None and derived.deploy.launch_s == pytest.approx(260.2)


def test_the_fleet_findings(derived: PlanArtifact) -> None:
    found = {f.name: f for f in derived.findings}
    assert (
        found["scale_in_safety"].verdict == "ok"
        and found["scale_in_safety"].figure("safe_floor") == 1
    )
    assert found["threshold_order"].verdict == "ok"
    assert found["cw_ratio"].verdict == "ok" and "by-definition" in found["cw_ratio"].message
    levels = derived.fleet
    assert levels is not None
    assert found["fleet_cost"].figure("headroom_cost_factor") == pytest.approx(
        levels.x_q_max_rps / levels.scale_out_rps, abs=1e-6
    )
    assert found["fleet_sizing"].figure("naive_max_instances") == 9
    # A ×1.25 surge on one instance at λ_out sheds 0.66 % (pooled chain of one: M/M/1/50 on
    # the measured curve); four pool it within the budget, where the burst takes a fleet of one.
    surge = found["surge_survival"]
    assert surge.verdict == "ok" and surge.figure("pooled_floor") == 4
    assert surge.figure("shed_share_one_instance") == pytest.approx(0.00655, abs=5e-5)
    assert "the burst step takes a smaller fleet to at least 4" in surge.message


def test_committed_fleet_plan_is_the_derived_one(derived: PlanArtifact, fleet_plan_path) -> None:
    committed = load_artifact(fleet_plan_path, PlanArtifact)
    skip = {"provenance"}
    assert committed.model_dump(exclude=skip) == derived.model_dump(exclude=skip)
    published = load_artifact(
        fleet_plan_path.parent / "plan-kokoro-82m-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    assert committed.plan_id != published.plan_id == "d0b4a6baef69"


def test_a_version_1_plan_loads_as_the_published_plan_it_deployed(reference_plan_path) -> None:
    old = load_artifact(V1_PLAN, PlanArtifact)
    new = load_artifact(reference_plan_path, PlanArtifact)
    assert (old.schema_version, old.rule, old.deploy) == (1, "published", None)
    assert old.plan_id == new.plan_id == "d0b4a6baef69"
    assert deploy_shape_of(old) == deploy_shape_of(new)
    skip = {"schema_version", "deploy", "target_units", "scale_in_units"}
    assert old.model_dump(exclude=skip) == new.model_dump(exclude=skip)


def test_a_plan_without_traffic_never_loads_the_simulation(
    repo_root, reference_qmax_path, reference_ttotal_path, tmp_path
) -> None:
    script = (
        "import sys; from tts_bench.cli import main; "
        f"code = main(['plan', '--qmax', {str(reference_qmax_path)!r}, '--ttotal', "
        f"{str(reference_ttotal_path)!r}, '--peak-rps', '5000', '--out', {str(tmp_path)!r}]); "
        "print(code, 'numba' in sys.modules, 'tts_bench.simulate.fleet' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=repo_root, capture_output=True, text=True, check=True
    )
    assert result.stdout.split()[-3:] == ["0", "False", "False"]


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--shed-budget", "0"], "--shed-budget 0 is not a fraction in (0, 1)"),
        (["--shed-budget", "1"], "--shed-budget 1 is not a fraction in (0, 1)"),
        (["--traffic", "--shed-budget", "-0.5"], "--shed-budget -0.5 is not a fraction"),
        (["--traffic", "steady:abc"], "--synthetic 'steady:abc'"),
        (["--traffic", "--seeds", "0"], "--seeds 0 must be at least 1"),
    ],
)
def test_bad_check_flags_are_refused_in_one_line(
    capsys, tmp_path, reference_qmax_path, reference_ttotal_path, extra, error
) -> None:
    code = main(
        ["plan", "--qmax", str(reference_qmax_path), "--ttotal", str(reference_ttotal_path),
         "--peak-rps", "5000", "--out", str(tmp_path / "out"), *extra]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and error in err, err
    assert not (tmp_path / "out").exists()


def test_a_trace_shorter_than_twice_the_planned_t_total_is_refused(
    capsys, tmp_path, reference_qmax_path, reference_ttotal_path
) -> None:
    trace = tmp_path / "short.csv"
    trace.write_text("minute,count\n" + "".join(f"{m},600\n" for m in range(16)))  # 960 s
    code = main(
        ["plan", "--qmax", str(reference_qmax_path), "--ttotal", str(reference_ttotal_path),
         "--peak-rps", "100", "--traffic-trace", str(trace), "--out", str(tmp_path / "out")]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "shorter than twice the planned T_total (1000.4 s)" in err


def _local_main_job_ladder() -> tuple:
    """The main job's shape: rungs 1, 2, 4 on this CPU, Q_max 2 at a local SLO."""
    slo = 13_400.0
    rungs = [rung(1, 0.23, 4400, slo_ms=slo), rung(2, 0.20, 9800, slo_ms=slo),
             rung(4, 0.21, 19_000, slo_ms=slo)]  # fmt: skip
    return qmax_artifact(rungs, slo_ms=slo), ttotal_artifact(36.9), slo


@pytest.mark.parametrize("rule", ["fleet", "published"])
def test_the_main_jobs_plan_at_q_max_2_is_feasible(rule: str) -> None:
    qmax, ttotal, slo = _local_main_job_ladder()
    request = PlanRequest(peak_rps=1, trough_rps=0.2, slo_ms=slo, rule=rule, surge_trials=50)
    plan = derive_plan(qmax, ttotal, request, SOURCES)
    assert plan.queue_max_depth == 2
    assert plan.feasible, [(f.name, f.message) for f in plan.findings if f.verdict == "stop"]
    surge = plan.finding("surge_survival")
    if rule == "fleet":  # two requests per instance pool a surge only across many instances
        assert surge is not None and surge.verdict == "warn"
        assert surge.figure("pooled_floor") is None or surge.figure("pooled_floor") > 4


def test_a_batching_engines_burst_fires_at_the_pooled_surge_occupancy() -> None:
    """X grows with n: a fleet holds about X⁻¹(λ) per instance at any size, so the burst cannot sit
    at one instance's λ_out occupancy (it would fire in normal operation); it sits at what a
    large pooled fleet holds under the surge, above what a fleet of two reads at λ_out."""
    rungs = [rung(n, 10 + n / 2, 20 * n) for n in (1, 20, 60, 100, 140)] + [rung(160, 90, 3200)]
    plan = derive_plan(qmax_artifact(rungs), ttotal_artifact(), PlanRequest(peak_rps=2000), SOURCES)
    levels = plan.fleet
    assert plan.feasible and levels is not None and levels.burst is not None
    curve = throughput_curve(qmax_artifact(rungs).curve_rungs)
    pooled = pooled_stationary(
        fleet_rule.POOLED_FLEET_INSTANCES, 1.25 * levels.scale_out_rps, curve.at, 140
    )
    assert levels.burst.occupancy == pytest.approx(pooled.mean_occupancy, abs=1e-6)
    assert levels.burst.occupancy > plan.c_scale_max
    order = plan.finding("threshold_order")
    assert order is not None and order.verdict == "ok"


def test_one_pooled_instance_is_the_single_instance_chain() -> None:
    """N = 1: the chain `stationary_occupancy` solves, and on a flat curve M/M/1/K's blocking."""
    flat = throughput_curve([rung(n, 12.0, 100) for n in (1, 5, 10)])
    one = pooled_stationary(1, 10.0, flat.at, 8)
    assert one.mean_occupancy == pytest.approx(stationary_occupancy(10.0, flat.at, 8))
    rho = 10 / 12
    assert one.shed_share == pytest.approx((1 - rho) * rho**8 / (1 - rho**9))


@settings(max_examples=40, deadline=None)
@given(
    load=st.floats(0.3, 1.2), limit=st.integers(1, 40), instances=st.integers(1, 30)
)  # fmt: skip
def test_pooling_never_sheds_more_per_request(load: float, limit: int, instances: int) -> None:
    """At the same load per instance, one more instance under least-outstanding routing sheds no
    larger share of the requests."""
    curve = throughput_curve([rung(1, 10.0, 50), rung(5, 12.0, 200), rung(40, 12.0, 2000)])
    fewer = pooled_stationary(instances, 12.0 * load, curve.at, limit)
    more = pooled_stationary(instances + 1, 12.0 * load, curve.at, limit)
    assert more.shed_share <= fewer.shed_share * (1 + 1e-9) + 1e-300


def _sagemaker_ladder(ratio: float | None) -> PlanArtifact:
    """A SageMaker ladder whose concurrency join read 1.0; `ratio`: its invocations join."""
    rungs = [rung(n, rps, ms, cw=1.0) for n, rps, ms in ((1, 16, 70), (5, 18, 300), (10, 18, 600))]
    if ratio is not None:  # the join read a little more at each higher rung
        rungs = [
            r.model_copy(
                update={"cloudwatch_ratios": {INVOCATIONS_KEY: ratio + r.concurrency / 100}}
            )
            for r in rungs
        ]
    qmax = qmax_artifact(rungs, fingerprint=SAGEMAKER)
    request = PlanRequest(peak_rps=100, trough_rps=5, surge_trials=20)
    return derive_plan(qmax, ttotal_artifact(fingerprint=SAGEMAKER), request, SOURCES)


def test_the_invocations_ratio_is_the_smallest_a_rung_measured() -> None:
    plan = _sagemaker_ladder(0.97)
    assert plan.target_units.ratio_rule == "smallest-rung"
    assert plan.target_units.cw_ratio == pytest.approx(0.98)
    assert plan.fleet is not None
    assert plan.scaling_target_value == pytest.approx(60 * plan.fleet.scale_out_rps * 0.98)


def test_a_sagemaker_ladder_without_the_invocations_join_warns_and_assumes_the_definition() -> None:
    plan = _sagemaker_ladder(None)
    cw = plan.finding("cw_ratio")
    assert plan.feasible and cw is not None and cw.verdict == "warn"
    assert "InvocationsPerInstance" in cw.message and "by AWS's definition" in cw.message
    assert plan.target_units.ratio_rule == "unmeasured" and plan.target_units.cw_ratio == 1.0


def test_a_ladder_run_with_no_fleet_level_says_so_where_the_plan_assumes_the_definition() -> None:
    plain = _sagemaker_ladder(None)
    qmax = qmax_artifact(
        [rung(n, rps, ms, cw=1.0) for n, rps, ms in ((1, 16, 70), (5, 18, 300), (10, 18, 600))],
        fingerprint=SAGEMAKER,
    ).model_copy(update={"fleet_level_skipped": True})
    request = PlanRequest(peak_rps=100, trough_rps=5, surge_trials=20)
    plan = derive_plan(qmax, ttotal_artifact(fingerprint=SAGEMAKER), request, SOURCES)
    cw, before = plan.finding("cw_ratio"), plain.finding("cw_ratio")
    assert plan.feasible and cw is not None and before is not None and cw.verdict == "warn"
    # Why it is unmeasured: the flag, where a ladder without it says only what it held.
    assert cw.message.startswith("the ladder was run with --no-fleet-level")
    assert before.message.startswith("no rung held two whole minutes")
    assert "by AWS's definition" in cw.message
    assert plan.target_units == plain.target_units  # the same assumption, only said why
    # A skipped level cannot come with a fleet verification rung.
    data = qmax.model_dump(mode="json")
    assert data["fleet_level_skipped"] is True
    data["verification"] = [
        {"role": "fleet", "source": "held", "surge_ratio": 1.25, "concurrency": 5,
         "achieved_rps": 18.0, "ttfab_p95_ms": 300.0, "client_mean_in_flight": 5.0,
         "cloudwatch_ratios": {"Maximum/10s": 1.0}, "usable": True, "unusable_reason": None}
    ]  # fmt: skip
    with pytest.raises(ValidationError, match="fleet_level_skipped, yet"):
        QmaxArtifact.model_validate(data)
    held = qmax.model_copy(update={"fleet_level_skipped": False})
    assert "fleet_level_skipped" not in held.model_dump(mode="json")  # written as before the flag


def test_a_sagemaker_ladder_without_the_concurrency_join_stops_the_burst() -> None:
    rungs = [rung(1, 16, 70), rung(5, 18, 300), rung(10, 18, 600), rung(20, 18, 1200)]
    qmax = qmax_artifact(rungs, fingerprint=SAGEMAKER)
    request = PlanRequest(peak_rps=100, trough_rps=5, surge_trials=20)
    plan = derive_plan(qmax, ttotal_artifact(fingerprint=SAGEMAKER), request, SOURCES)
    cw = plan.finding("cw_ratio")
    assert cw is not None and cw.verdict == "stop" and "burst threshold" in cw.message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    x1=st.floats(1, 50),
    growth=st.floats(1.0, 8.0),
    q_max=st.integers(2, 200),
    surge=st.floats(1.01, 1.49),
    peak=st.floats(1, 1e5),
)
def test_the_levels_keep_the_surge_headroom_for_any_curve(x1, growth, q_max, surge, peak) -> None:
    """Batched (X grows) or serial (X flat): a surge at λ_out stays below X(Q_max), the scale-in
    level sits under the target, and one instance holds more at λ_out than at λ_in."""

    def x(n: int) -> float:
        return x1 * (1 + (growth - 1) * (n - 1) / max(1, q_max - 1))

    passing = [rung(n, x(n), 2900 * n / q_max) for n in sorted({1, max(1, q_max // 2), q_max})]
    qmax = qmax_artifact([*passing, rung(q_max + 1, x(q_max), 3100)])
    request = PlanRequest(peak_rps=peak, trough_rps=peak / 10, surge_ratio=surge, surge_trials=1)
    plan = derive_plan(qmax, ttotal_artifact(), request, SOURCES)
    levels = plan.fleet
    assert levels is not None and plan.rule == "fleet"
    assert surge * levels.scale_out_rps <= levels.x_q_max_rps * (1 - levels.margin) + 1e-6
    # The step scale-in sits at the target on the load with one instance fewer; target
    # tracking's own, for small fleets, below it.
    assert plan.scale_in_threshold <= plan.scaling_target_value
    tracking = plan.deploy.policy("invocations-target") if plan.deploy else None
    assert isinstance(tracking, TargetTrackingSpec) and tracking.low_alarm is not None
    assert tracking.low_alarm.threshold < plan.scaling_target_value
    assert plan.c_scale_min <= plan.c_scale_max <= q_max
    assert plan.max_instances == max(
        plan.min_instances, math.ceil(peak / levels.scale_out_rps - 1e-9)
    )
