"""The report's plan part shows × oracle beside a `plan --traffic` check, and a schedule."""

from __future__ import annotations

import shutil

from tests.conftest import REFERENCE_QMAX, REFERENCE_TTOTAL
from tts_bench.artifacts.plan import RuleFigures, SeedCheck
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.schedule.attach import with_schedule
from tts_bench.planning.steps import PlanRequest
from tts_bench.planning.traffic_check import with_check
from tts_bench.report.plan_tables import schedule_table as _schedule
from tts_bench.report.plan_tables import traffic_check_table as _traffic_check


def _figures(rule: str, hours: float) -> RuleFigures:
    return RuleFigures(
        rule=rule, requests=1000, shed=0, shed_share=0.0, instance_hours=hours,
        peak_instances=10, aws_semantics="documented",
    )  # fmt: skip


def test_the_check_and_the_schedule_appear_with_x_oracle(tmp_path) -> None:
    for source in (REFERENCE_QMAX, REFERENCE_TTOTAL):
        shutil.copy(source, tmp_path / source.name)
    seeds = [
        SeedCheck(seed=1, rules=[_figures("fleet", 110.0), _figures("published", 130.0)],
                  oracle_instance_hours=100.0),
    ]  # fmt: skip

    def check(plan, *_):  # type: ignore[no-untyped-def]
        scheduled = with_schedule(plan, "a hand-made day", [10.0] * 5 + [300.0] * 10)
        return with_check(scheduled, "a hand-made day", seeds, 0.0001, 900.0)

    request = PlanRequest(peak_rps=400, trough_rps=10, rule="fleet")
    plan = plan_from_files(
        tmp_path / REFERENCE_QMAX.name, tmp_path / REFERENCE_TTOTAL.name, request, tmp_path, check
    ).plan
    checked = str(_traffic_check(plan))
    assert "× oracle" in checked and "1.100" in checked and "1.300" in checked
    comparison = plan.finding("rule_comparison")
    assert comparison is not None and comparison.figure("x_oracle") == 1.1
    shown = str(_schedule(plan))
    assert plan.schedule is not None
    assert all(f"<td>{s.at_utc}</td>" in shown for s in plan.schedule.steps), shown
