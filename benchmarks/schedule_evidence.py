"""The schedule's evidence table (docs/simulation.md, "Every shape with and without a schedule").

For each traffic shape, the reference artifacts' fleet plan (peak 5000, trough 10), the same plan
with the schedule `plan --schedule` derives from the shape, and the published twin, over seeds
1..N under both readings of AWS (`documented`, `pessimistic`), the same arrivals for every plan
and reading of a seed, as `plan --traffic` simulates them (`simulate.check`). Prints one markdown
row per plan and reading, as soon as a shape is done: mean shed share (its largest seed),
instance-hours, × published (over the published plan's on the same days and reading) and
× oracle (over the clairvoyant fleet's mean), then CPU seconds. `--forecast-errors` adds the
scheduled plan on the day shifted ±30 min and scaled ×0.8 and ×1.2 (`check.forecast_errors`).

    PYTHONPATH=.:container nice -n 19 python benchmarks/schedule_evidence.py --seeds 5 \\
        --shape diurnal:10:5000:14400 --shape trace:/tmp/step-1000-1250.csv [--forecast-errors] \\
        [--only-scheduled]

One process, one day at a time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.plan import PlanArtifact, RuleFigures, SourceArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import TtsBenchError
from tts_bench.planning.aws.semantics import AwsSemantics
from tts_bench.planning.plan import derive_plan
from tts_bench.planning.schedule.attach import with_schedule
from tts_bench.planning.steps import PlanRequest
from tts_bench.simulate.check import (
    CHECK_SEMANTICS,
    CheckTraffic,
    day_figures,
    forecast_errors,
    oracle_hours,
)

REPO = Path(__file__).resolve().parent.parent
QMAX = REPO / "measurements" / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
TTOTAL = REPO / "measurements" / "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"


@dataclass(frozen=True)
class Plans:
    fleet: PlanArtifact
    published: PlanArtifact
    qmax: QmaxArtifact


def reference_plans(peak_rps: float = 5000.0) -> Plans:
    qmax, ttotal = load_artifact(QMAX, QmaxArtifact), load_artifact(TTOTAL, TtotalArtifact)
    sources = {
        name: SourceArtifact(path=str(path), sha256=sha256_file(path), provenance=a.provenance.kind)
        for name, path, a in (("qmax", QMAX, qmax), ("ttotal", TTOTAL, ttotal))
    }

    def plan(rule: str) -> PlanArtifact:
        request = PlanRequest(peak_rps=peak_rps, trough_rps=10.0, rule=rule)  # type: ignore[arg-type]
        return derive_plan(qmax, ttotal, request, sources)

    return Plans(plan("fleet"), plan("published"), qmax)


def traffic_of(shape: str) -> CheckTraffic:
    if shape.startswith("trace:"):
        return CheckTraffic(trace=Path(shape.removeprefix("trace:")))
    return CheckTraffic(spec=shape)


def mean_row(rows: Sequence[RuleFigures]) -> tuple[float, float, float]:
    """Mean shed share, largest seed's shed share, mean instance-hours."""
    shares = [r.shed_share for r in rows]
    return statistics.mean(shares), max(shares), statistics.mean(r.instance_hours for r in rows)


def percent(share: float) -> str:
    return "0" if share == 0 else f"{100 * share:.4f} %"


def schedule_label(plan: PlanArtifact) -> str:
    schedule = plan.schedule
    if schedule is None:
        return "no"
    every = {86_400: "daily", 604_800: "weekly"}.get(schedule.period_s)
    n = len(schedule.steps)
    return (
        f"yes ({n} step{'' if n == 1 else 's'}, {every or f'every {schedule.period_s // 60} min'})"
    )


def one_day(
    plan: PlanArtifact,
    qmax: QmaxArtifact,
    traffic: CheckTraffic,
    seed: int,
    semantics: AwsSemantics,
) -> RuleFigures:
    """One seed's day, printed as it comes (a comment line) so that a run cut short keeps it."""
    row = day_figures(plan, qmax, traffic, seed, semantics)
    print(
        f"<!-- seed {seed} {plan.rule} schedule={plan.schedule is not None} {semantics.name}: "
        f"shed {row.shed:.0f}/{row.requests:.0f} ({percent(row.shed_share)}), "
        f"{row.instance_hours:,.3f} instance-hours -->",
        flush=True,
    )
    return row


def shape_rows(shape: str, plans: Plans, seeds: Sequence[int], only_scheduled: bool) -> list[str]:
    traffic = traffic_of(shape)
    try:
        scheduled: PlanArtifact | None = with_schedule(plans.fleet, *traffic.forecast(plans.fleet))
    except TtsBenchError as refused:
        scheduled = None
        print(f"<!-- {shape}: no schedule: {refused} -->", flush=True)
    named = [] if only_scheduled else [("fleet", plans.fleet), ("published", plans.published)]
    if scheduled is not None:
        named.insert(1 if named else 0, ("fleet", scheduled))
    oracle = statistics.mean(oracle_hours(plans.fleet, traffic, s) or 0.0 for s in seeds)
    lines = []
    for semantics in CHECK_SEMANTICS:
        figures = [
            (
                rule,
                plan,
                mean_row([one_day(plan, plans.qmax, traffic, s, semantics) for s in seeds]),
            )
            for rule, plan in named
        ]
        published = next((f[2][2] for f in figures if f[0] == "published"), None)
        for rule, plan, (shed, worst, hours) in figures:
            versus = f"{hours / published:.3f}" if published else "—"
            label = "—" if rule == "published" else schedule_label(plan)
            lines.append(
                f"| `{shape}` | {rule} | {label} | {semantics.name} | {percent(shed)} "
                f"({percent(worst)}) | {hours:,.1f} | {versus} | {hours / oracle:.3f} |"
            )
    lines.append(f"<!-- {shape}: clairvoyant fleet {oracle:,.1f} instance-hours -->")
    if scheduled is not None:
        lines.append(
            f"<!-- steps: {[(s.at_utc, s.min_capacity) for s in scheduled.schedule.steps]} -->"
        )  # type: ignore[union-attr]
    return lines


def error_rows(shape: str, plans: Plans, seeds: Sequence[int]) -> list[str]:
    traffic = traffic_of(shape)
    scheduled = with_schedule(plans.fleet, *traffic.forecast(plans.fleet))
    lines = []
    for row in forecast_errors(scheduled, plans.qmax, traffic, seeds):
        day = f"shifted {row.shift_s / 60:+g} min" if row.shift_s else f"load ×{row.scale:g}"
        lines.append(
            f"| `{shape}` | {day} | {row.aws_semantics} | {percent(row.shed_share)} | "
            f"{row.instance_hours:,.1f} | {row.instance_hours / row.oracle_instance_hours:.3f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="the last seed")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--peak-rps", type=float, default=5000.0, help="the plans' (default 5000)")
    parser.add_argument("--shape", action="append", required=True)
    parser.add_argument("--forecast-errors", action="store_true")
    parser.add_argument("--only-scheduled", action="store_true")
    args = parser.parse_args()
    plans = reference_plans(args.peak_rps)
    seeds = range(args.first_seed, args.seeds + 1)
    for shape in args.shape:
        started = time.process_time()
        for line in shape_rows(shape, plans, seeds, args.only_scheduled):
            print(line, flush=True)
        if args.forecast_errors:
            for line in error_rows(shape, plans, seeds):
                print(line, flush=True)
        print(
            f"<!-- {shape}: {time.process_time() - started:.0f} CPU s, {time.strftime('%H:%M:%S')} UTC -->",
            flush=True,
        )


if __name__ == "__main__":
    main()
