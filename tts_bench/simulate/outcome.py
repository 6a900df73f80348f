"""A policy run's totals as the artifact records them, and the printed comparison table."""

from __future__ import annotations

from tts_bench.artifacts.simulation import PolicyOutcome
from tts_bench.simulate.replay import PolicyRun

SECONDS_PER_HOUR = 3600.0


def policy_outcome(run: PolicyRun, price_per_hour_usd: float | None) -> PolicyOutcome:
    hours = run.instance_seconds / SECONDS_PER_HOUR
    share = (lambda n: n / run.requests) if run.requests else (lambda n: 0.0)
    return PolicyOutcome(
        policy=run.policy,
        requests=run.requests,
        shed=run.shed,
        shed_share=round(share(run.shed), 9),
        over_slo=run.over_slo,
        over_slo_share=round(share(run.over_slo), 9),
        instance_hours=round(hours, 3),
        cost_usd=None if price_per_hour_usd is None else round(hours * price_per_hour_usd, 2),
        peak_instances=run.peak_instances,
    )


def render_table(outcomes: list[PolicyOutcome], oracle_hours: float | None = None) -> str:
    """The policies side by side; with the clairvoyant fleet's instance-hours, each policy's
    as a ratio to them ("× oracle", `simulate.oracle`)."""
    header = (
        "policy",
        "requests",
        "shed",
        "shed %",
        "over SLO",
        "over SLO %",
        "instance-h",
        "cost $",
        "peak",
        *(("× oracle",) if oracle_hours else ()),
    )
    rows = [
        (
            o.policy,
            f"{o.requests:,}",
            f"{o.shed:,}",
            f"{100 * o.shed_share:.4f}",
            f"{o.over_slo:,}",
            f"{100 * o.over_slo_share:.4f}",
            f"{o.instance_hours:,.1f}",
            "-" if o.cost_usd is None else f"{o.cost_usd:,.2f}",
            str(o.peak_instances),
            *((f"{o.instance_hours / oracle_hours:.3f}",) if oracle_hours else ()),
        )
        for o in outcomes
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), *(line(r) for r in rows)])
