"""`plan --traffic`: the simulated days' figures recorded in the plan, and what they decide.

The simulation itself runs in `tts_bench.simulate.check`; this module only records its figures
(`PlanArtifact.traffic_check`) and judges them in the `rule_comparison` finding: the plan is
`stop` when its own rule's mean shed share over the seeds exceeds the budget. It never changes a
deployed number; the plan's id covers the check, so a checked plan is told from an unchecked one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Final

from tts_bench.artifacts.plan import (
    ForecastError,
    PlanArtifact,
    RuleFigures,
    SeedCheck,
    TrafficCheck,
    Verdict,
)
from tts_bench.errors import TtsBenchError
from tts_bench.planning.findings import FINDING_ORDER, finding
from tts_bench.planning.plan import plan_id

DEFAULT_SEEDS: Final = 5
# A wrong forecast may shed this many times the budget before `forecast_error` warns.
FORECAST_BUDGET_FACTOR: Final = 5
DAY_S: Final = 86_400


def default_traffic(peak_rps: float, trough_rps: float, surge_ratio: float) -> str:
    """A bare `--traffic`: a day from the trough to the peak, with a surge of the surge ratio at
    the steepest point of the morning ramp (a quarter of the day)."""
    return f"diurnal:{trough_rps:g}:{peak_rps:g}:{DAY_S}+surge:{surge_ratio:g}:{DAY_S // 4}"


def check_budget(budget: float) -> float:
    if not 0 < budget < 1:
        raise TtsBenchError(
            f"--shed-budget {budget:g} is not a fraction in (0, 1); give e.g. 0.0001 for 0.01 %"
        )
    return budget


def mean_figures(
    seeds: Sequence[SeedCheck], rule: str, semantics: str | None = None
) -> RuleFigures:
    rows = [r for s in seeds for r in s.rules if r.rule == rule and r.aws_semantics == semantics]
    return RuleFigures(
        rule=rule,  # type: ignore[arg-type]
        requests=statistics.mean(r.requests for r in rows),
        shed=statistics.mean(r.shed for r in rows),
        shed_share=round(statistics.mean(r.shed_share for r in rows), 9),
        instance_hours=round(statistics.mean(r.instance_hours for r in rows), 3),
        peak_instances=statistics.mean(r.peak_instances for r in rows),
        aws_semantics=semantics,
    )


def with_check(
    plan: PlanArtifact, traffic: str, seeds: Sequence[SeedCheck], budget: float,
    duration_s: float, trace_sha256: str | None = None,
    forecast: Sequence[ForecastError] | None = None,
) -> PlanArtifact:  # fmt: skip
    """The plan with the check recorded and the `rule_comparison` finding it decides."""
    rules = sorted({r.rule for s in seeds for r in s.rules}, key=lambda r: r != plan.rule)
    sets = list(dict.fromkeys(r.aws_semantics for s in seeds for r in s.rules))
    hours = [s.oracle_instance_hours for s in seeds]
    check = TrafficCheck(
        traffic=traffic,
        trace_sha256=trace_sha256,
        duration_s=duration_s,
        shed_budget=check_budget(budget),
        seeds=list(seeds),
        mean=[mean_figures(seeds, rule, semantics) for semantics in sets for rule in rules],
        oracle_instance_hours=(
            None if None in hours else round(statistics.mean(hours), 3)  # type: ignore[type-var]
        ),
        forecast_errors=list(forecast) if forecast is not None else None,
    )
    replaced = ("rule_comparison", "aws_semantics", "forecast_error")
    findings = [f for f in plan.findings if f.name not in replaced]
    findings.append(rule_comparison(plan.rule, check))
    if len(check.semantics) > 1:
        findings.append(semantics_comparison(check))
    if check.forecast_errors:
        findings.append(forecast_error(check.forecast_errors, check.shed_budget))
    findings.sort(key=lambda f: (-f.verdict.severity, FINDING_ORDER.index(f.name)))
    return identified(
        plan.model_copy(
            update={
                "traffic_check": check,
                "findings": findings,
                "feasible": not any(f.verdict is Verdict.STOP for f in findings),
            }
        )
    )


def identified(plan: PlanArtifact) -> PlanArtifact:
    """The plan with its id over its inputs and what `--traffic` and `--schedule` added (a plan
    with neither keeps the id `derive_plan` gave it)."""
    extra: dict[str, object] = {}
    if (check := plan.traffic_check) is not None:
        extra["traffic_check"] = check.model_dump(mode="json", exclude={"seeds", "mean"})
        extra["traffic_check"]["seeds"] = [s.seed for s in check.seeds]  # type: ignore[index]
    if (schedule := plan.schedule) is not None:
        # A daily schedule's id leaves the period out, as before periods were recorded.
        daily = {"period_s"} if schedule.period_s == 86_400 else set()
        extra["schedule"] = schedule.model_dump(mode="json", exclude={"minute_rps", *daily})
    if not extra:
        return plan
    plan_id_ = plan_id(plan.inputs, dict(plan.sources), plan.fingerprint, plan.rule, extra)
    return plan.model_copy(update={"plan_id": plan_id_})


_SPANS = {86_400.0: "day", 604_800.0: "week"}


def simulated_runs(count: int, duration_s: float) -> str:
    """What was simulated, in words: "5 simulated days", "1 simulated week", "5 simulated runs of
    4 h" (a day or a week when the runs are exactly that long)."""
    plural = "" if count == 1 else "s"
    if (span := _SPANS.get(float(duration_s))) is not None:
        return f"{count} simulated {span}{plural}"
    length = f"{duration_s / 3600:.3g} h" if duration_s >= 3600 else f"{duration_s / 60:.3g} min"
    return f"{count} simulated run{plural} of {length}"


def rule_comparison(rule: str, check: TrafficCheck):  # -> Finding
    own = check.mean_of(rule)
    # The rules compared as AWS is documented; `aws_semantics` says what the other reading does.
    others = [m for m in check.mean if m.rule != rule and m.aws_semantics in ("documented", None)]
    seeds = ", ".join(str(s.seed) for s in check.seeds)
    figures: dict[str, object] = {
        "shed_share": own.shed_share if own else None,
        "instance_hours": own.instance_hours if own else None,
        "shed_budget": check.shed_budget,
    }
    text = (
        f"over {simulated_runs(len(check.seeds), check.duration_s)} of {check.traffic} "
        f"(seeds {seeds}) the {rule} "
        f"rule sheds {100 * own.shed_share:.4f} % (budget {100 * check.shed_budget:.4f} %) "
        f"on {own.instance_hours:,.1f} instance-hours, peak {own.peak_instances:.0f}"
        if own
        else f"the {rule} rule was not simulated"
    )
    oracle = check.oracle_instance_hours
    if own and oracle:
        figures["oracle_instance_hours"] = oracle
        figures["x_oracle"] = round(own.instance_hours / oracle, 3)
        text += f", {own.instance_hours / oracle:.3f} × oracle ({oracle:,.1f})"
    for other in others:
        ratio = own.instance_hours / other.instance_hours if own and other.instance_hours else None
        figures[f"{other.rule}_shed_share"] = other.shed_share
        figures[f"{other.rule}_instance_hours"] = other.instance_hours
        text += (
            f"; the {other.rule} rule would shed {100 * other.shed_share:.4f} % on "
            f"{other.instance_hours:,.1f} instance-hours"
            + (f", {other.instance_hours / oracle:.3f} × oracle" if oracle else "")
            + (f" (this plan ×{ratio:.3f})" if ratio else "")
        )
    over = own is None or own.shed_share > check.shed_budget
    return finding(
        "rule_comparison",
        Verdict.STOP if over else Verdict.OK,
        text + ("; over the shed budget" if over else ""),
        **figures,  # type: ignore[arg-type]
    )


def forecast_error(rows: Sequence[ForecastError], budget: float):  # -> Finding
    """The scheduled plan on its day shifted and scaled: `warn` when a wrong forecast sheds
    more than `FORECAST_BUDGET_FACTOR` × the budget on the mean (issue 37: 0.05 % for 0.01 %)."""
    allowed = FORECAST_BUDGET_FACTOR * budget
    figures: dict[str, object] = {"forecast_shed_budget": allowed}
    parts = []
    for row in rows:
        day = f"{row.shift_s / 60:+.0f} min" if row.shift_s else f"×{row.scale:g} load"
        key = f"shift_{row.shift_s / 60:+.0f}min" if row.shift_s else f"scale_{row.scale:g}"
        figures[f"{key}_{row.aws_semantics}_shed_share"] = row.shed_share
        ratio = (
            row.instance_hours / row.oracle_instance_hours if row.oracle_instance_hours else None
        )
        figures[f"{key}_{row.aws_semantics}_x_oracle"] = round(ratio, 3) if ratio else None
        parts.append(
            f"{day} under {row.aws_semantics}: {100 * row.shed_share:.4f} % shed, "
            + (f"{ratio:.3f} × oracle" if ratio else "no oracle")
        )
    over = [r for r in rows if r.shed_share > allowed]
    text = f"the schedule on a wrong forecast (budget {100 * allowed:.4f} %): " + "; ".join(parts)
    return finding("forecast_error", Verdict.WARN if over else Verdict.OK, text, **figures)  # type: ignore[arg-type]


def semantics_comparison(check: TrafficCheck):  # -> Finding
    """Each rule's shed verdict under every variant set of AWS's open points, and where it
    changes between them (`warn`: a verdict that holds only under one reading of AWS)."""
    rules = list(dict.fromkeys(m.rule for m in check.mean))
    figures: dict[str, object] = {}
    parts, changes = [], []
    for rule in rules:
        verdicts = {}
        for semantics in check.semantics:
            figures_of = check.mean_of(rule, semantics)
            if figures_of is None:
                continue
            within = figures_of.shed_share <= check.shed_budget
            verdicts[semantics] = within
            figures[f"{rule}_{semantics}_shed_share"] = figures_of.shed_share
            figures[f"{rule}_{semantics}_instance_hours"] = figures_of.instance_hours
            parts.append(
                f"{rule} under {semantics}: {100 * figures_of.shed_share:.4f} % shed on "
                f"{figures_of.instance_hours:,.1f} instance-hours"
                f" ({'within' if within else 'over'} the budget)"
            )
        if len(set(verdicts.values())) > 1:
            holds = [s for s, ok in verdicts.items() if ok]
            changes.append(f"the {rule} rule keeps the budget only under {', '.join(holds)}")
    text = "; ".join(parts) + (
        "; the verdict changes: " + "; ".join(changes)
        if changes
        else "; no rule's verdict changes between the readings of AWS"
    )
    return finding("aws_semantics", Verdict.WARN if changes else Verdict.OK, text, **figures)  # type: ignore[arg-type]
