"""`plan --traffic`: both rules simulated per seed, recorded in the plan, judged by the budget."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REFERENCE_QMAX, REFERENCE_TTOTAL
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.cli import main
from tts_bench.planning.traffic_check import default_traffic, simulated_runs

SPEC = "steady:30+surge:1.25:600"


def plan_with(capsys, tmp_path, *extra: str) -> tuple[int, PlanArtifact]:
    code = main(
        ["plan", "--qmax", str(REFERENCE_QMAX), "--ttotal", str(REFERENCE_TTOTAL),
         "--peak-rps", "40", "--trough-rps", "10", "--traffic", SPEC, "--seeds", "2",
         "--json", "--out", str(tmp_path), *extra]
    )  # fmt: skip
    return code, PlanArtifact.model_validate(json.loads(capsys.readouterr().out))


def test_both_rules_are_simulated_per_seed_and_compared(capsys, tmp_path) -> None:
    from tts_bench.simulate.check import CheckTraffic, day_figures

    code, plan = plan_with(capsys, tmp_path)
    check = plan.traffic_check
    assert code == 0 and plan.feasible and check is not None
    assert [s.seed for s in check.seeds] == [1, 2]
    # Each rule under each reading of AWS (docs/aws-semantics.md), the same arrivals for all.
    pairs = [("fleet", "documented"), ("published", "documented")]
    pairs += [("fleet", "pessimistic"), ("published", "pessimistic")]
    assert [[(r.rule, r.aws_semantics) for r in s.rules] for s in check.seeds] == [pairs] * 2
    assert [(m.rule, m.aws_semantics) for m in check.mean] == pairs
    assert check.semantics == ["documented", "pessimistic"]
    # Each seed's figures are what `simulate --seed S --policy plan` gives for that plan.
    again = day_figures(plan, _qmax(), CheckTraffic(SPEC), 2)
    assert check.seeds[1].rules[0].model_dump() == again.model_dump()
    comparison = plan.finding("rule_comparison")
    assert comparison is not None and comparison.verdict == "ok"
    assert "the published rule would shed" in comparison.message
    # The spec's runs are shorter than a day: they are said as runs of their length.
    hours = f"{check.duration_s / 3600:.3g} h"
    assert comparison.message.startswith(f"over 2 simulated runs of {hours} of {SPEC} (seeds 1, 2)")
    assert comparison.figure("published_instance_hours") == check.mean[1].instance_hours
    readings = plan.finding("aws_semantics")
    assert readings is not None and "fleet under pessimistic" in readings.message
    assert readings.figure("fleet_pessimistic_shed_share") == check.mean[2].shed_share


@pytest.mark.parametrize(
    ("count", "duration_s", "expected"),
    [
        (5, 86_400, "5 simulated days"),
        (1, 86_400, "1 simulated day"),
        (1, 604_800, "1 simulated week"),
        (5, 14_400, "5 simulated runs of 4 h"),
        (2, 5_400, "2 simulated runs of 1.5 h"),
        (1, 1_800, "1 simulated run of 30 min"),
    ],
)
def test_what_was_simulated_is_said_by_its_length(count, duration_s, expected) -> None:
    assert simulated_runs(count, duration_s) == expected


def test_a_mean_shed_share_over_the_budget_stops_the_plan(capsys, tmp_path) -> None:
    code, plan = plan_with(capsys, tmp_path, "--rule", "published", "--shed-budget", "1e-9")
    comparison = plan.finding("rule_comparison")
    assert code == 1 and not plan.feasible and comparison is not None
    assert comparison.verdict == "stop" and "over the shed budget" in comparison.message
    assert plan.findings[0].name == "rule_comparison"
    assert plan.traffic_check is not None and plan.traffic_check.mean[0].rule == "published"


def test_the_check_never_changes_a_deployed_number(capsys, tmp_path) -> None:
    _, checked = plan_with(capsys, tmp_path / "checked")
    assert main(
        ["plan", "--qmax", str(REFERENCE_QMAX), "--ttotal", str(REFERENCE_TTOTAL),
         "--peak-rps", "40", "--trough-rps", "10", "--json", "--out", str(tmp_path / "plain")]
    ) == 0  # fmt: skip
    plain = PlanArtifact.model_validate(json.loads(capsys.readouterr().out))
    assert checked.deploy == plain.deploy and checked.fleet == plain.fleet
    assert checked.plan_id != plain.plan_id  # the id covers the check


@pytest.mark.parametrize(
    ("peak", "trough", "ratio", "spec"),
    [(5000, 10, 1.25, "diurnal:10:5000:86400+surge:1.25:21600"),
     (40, 40, 1.2, "diurnal:40:40:86400+surge:1.2:21600")],
)  # fmt: skip
def test_a_bare_traffic_is_a_day_with_a_surge_at_the_steepest_point(peak, trough, ratio, spec):
    assert default_traffic(peak, trough, ratio) == spec


def _qmax():  # type: ignore[no-untyped-def]
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.artifacts.qmax import QmaxArtifact

    return load_artifact(REFERENCE_QMAX, QmaxArtifact)
