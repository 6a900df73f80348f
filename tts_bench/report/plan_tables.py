"""The plan part's tables of what `plan --traffic` and `--schedule` added: the simulated days'
means with × oracle, and the scheduled actions."""

from __future__ import annotations

from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.report.page import Html, number, table


def traffic_check_table(p: PlanArtifact) -> Html:
    """`plan --traffic`'s means, each rule under each reading of AWS, with × oracle."""
    check = p.traffic_check
    if check is None:
        return Html("")
    oracle = check.oracle_instance_hours
    return table(
        ["rule", "AWS", "requests", "shed share", "instance-hours", "× oracle", "peak instances"],
        [
            [m.rule, m.aws_semantics or "-", number(m.requests, ",.0f"),
             number(100 * m.shed_share, ".4f", "%"), number(m.instance_hours, ",.0f"),
             number(m.instance_hours / oracle if oracle else None, ".3f"),
             number(m.peak_instances, ".0f")]
            for m in check.mean
        ],
        f"Simulated on {check.traffic}, mean of {len(check.seeds)} seeds "
        f"(shed budget {check.shed_budget:g}; the clairvoyant fleet "
        + (f"{oracle:,.0f} instance-hours)" if oracle else "not recorded)"),
    )  # fmt: skip


def schedule_table(p: PlanArtifact) -> Html:
    """`plan --schedule`'s scheduled actions, times in UTC."""
    schedule = p.schedule
    if schedule is None:
        return Html("")
    return table(
        ["UTC (+00:00), daily", "MinCapacity"],
        [[s.at_utc, s.min_capacity] for s in schedule.steps],
        f"Scheduled actions from {schedule.traffic} (rates sha256 "
        f"{schedule.minute_rps_sha256[:12]}), {schedule.lead_s:g} s ahead, held ±{schedule.hold_s:g} s",
    )
