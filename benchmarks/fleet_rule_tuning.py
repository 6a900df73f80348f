"""Tuning the fleet rule's constants on simulated days, beside the published rule.

For each candidate (a margin floor and whether the burst step is deployed), derives the fleet plan of
the reference artifacts with those constants (in this process only: the committed values live
in `tts_bench/planning/fleet_rule.py`), simulates it and the published plan over seeds 1..N of
each traffic shape, and prints the mean and spread of shed share, instance-hours and peak, with
the instance-hours as a ratio of the published rule's on the same days. Two processes share the
seeds; CPU seconds are printed with the load average.

    PYTHONPATH=.:container python benchmarks/fleet_rule_tuning.py [--seeds 5] \\
        [--margin 0.05 --margin 0.03 ...] [--burst on --burst off] [--shape SPEC ...]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tts_bench.artifacts.schema import (
    PlanArtifact,
    QmaxArtifact,
    SourceArtifact,
    TtotalArtifact,
    load_artifact,
    sha256_file,
)
from tts_bench.planning import fleet_rule
from tts_bench.planning.plan import derive_plan
from tts_bench.planning.steps import PlanRequest
from tts_bench.simulate.check import CheckTraffic, day_figures

REPO = Path(__file__).resolve().parent.parent
M = REPO / "measurements"
QMAX = M / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
TTOTAL = M / "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
REFERENCE_DAY = "diurnal:10:5000:86400+surge:1.25:21600"


def plan_of(
    rule: str, margin: float, burst: bool, qmax: Path, ttotal: Path, **request: object
) -> PlanArtifact:
    fleet_rule.FLEET_MARGIN_FLOOR, fleet_rule.FLEET_BURST = margin, burst  # type: ignore[misc]
    q, t = load_artifact(qmax, QmaxArtifact), load_artifact(ttotal, TtotalArtifact)
    sources = {
        name: SourceArtifact(path=str(path), sha256=sha256_file(path), provenance=a.provenance.kind)
        for name, path, a in (("qmax", qmax, q), ("ttotal", ttotal, t))
    }
    fields = {"peak_rps": 5000.0, "trough_rps": 10.0, "rule": rule, **request}
    return derive_plan(q, t, PlanRequest(**fields), sources)  # type: ignore[arg-type]


def one(job: tuple[str, float, bool, str, int, str, dict]) -> tuple[tuple, dict, float]:
    rule, margin, burst, spec, seed, qmax, request = job
    if rule.startswith("file:"):  # a plan file edited by hand (a candidate design)
        plan = load_artifact(Path(rule.split("=", 1)[1]), PlanArtifact)
    else:
        plan = plan_of(rule, margin, burst, Path(qmax), TTOTAL, **request)
    cpu = time.process_time()
    traffic = (
        CheckTraffic(trace=Path(spec.removeprefix("trace:")))
        if spec.startswith("trace:")
        else CheckTraffic(spec)
    )
    figures = day_figures(plan, load_artifact(Path(qmax), QmaxArtifact), traffic, seed)
    return (rule, margin, burst, spec), figures.model_dump(), time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--margin", type=float, action="append")
    parser.add_argument("--burst", choices=("on", "off"), action="append")
    parser.add_argument(
        "--shape",
        action="append",
        help=f"a synthetic spec or trace:FILE (default {REFERENCE_DAY})",
    )
    parser.add_argument("--qmax", default=str(QMAX))
    parser.add_argument("--peak-rps", type=float, default=5000.0)
    parser.add_argument("--trough-rps", type=float, default=10.0)
    parser.add_argument("--allow-config-mismatch", action="store_true")
    parser.add_argument("--no-published", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--plan-file",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="also simulate a plan file (a hand-edited candidate), labelled NAME",
    )
    args = parser.parse_args()
    margins = args.margin or [fleet_rule.FLEET_MARGIN_FLOOR]
    bursts = [b == "on" for b in (args.burst or ["on" if fleet_rule.FLEET_BURST else "off"])]
    shapes = args.shape or [REFERENCE_DAY]
    request = {
        "peak_rps": args.peak_rps,
        "trough_rps": args.trough_rps,
        "allow_config_mismatch": args.allow_config_mismatch,
    }
    seeds = range(1, args.seeds + 1)
    jobs = [
        ("fleet", m, b, spec, seed, args.qmax, request)
        for m, b, spec, seed in itertools.product(margins, bursts, shapes, seeds)
    ]
    jobs += [
        (f"file:{entry}", 0.0, False, spec, s, args.qmax, request)
        for entry in args.plan_file
        for spec in shapes
        for s in seeds
    ]
    if not args.no_published:
        jobs += [
            ("published", 0.0, False, spec, s, args.qmax, request) for spec in shapes for s in seeds
        ]
    load = os.getloadavg()[0]
    wall = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one, jobs))
    by: dict[tuple, list[dict]] = {}
    cpu = 0.0
    for key, figures, seconds in results:
        by.setdefault(key, []).append(figures)
        cpu += seconds
    print(
        f"{len(jobs)} policy-days, {cpu:.0f} CPU s, {time.perf_counter() - wall:.0f} s wall; "
        f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        "| shape | rule | margin | burst | shed % mean (min–max) | instance-h mean (min–max) | × published | peak |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for key, rows in by.items():
        rule, margin, burst, spec = key
        base = by.get(("published", 0.0, False, spec))
        shed = [100 * r["shed_share"] for r in rows]
        hours = [r["instance_hours"] for r in rows]
        ratio = (
            f"{statistics.mean(hours) / statistics.mean(r['instance_hours'] for r in base):.3f}"
            if base
            else "-"
        )
        if rule.startswith("file:"):
            rule = rule.removeprefix("file:").split("=", 1)[0]
        print(
            f"| {spec} | {rule} | {margin if rule == 'fleet' else '-'} | "
            f"{('on' if burst else 'off') if rule == 'fleet' else '-'} | "
            f"{statistics.mean(shed):.4f} ({min(shed):.4f}–{max(shed):.4f}) | "
            f"{statistics.mean(hours):,.0f} ({min(hours):,.0f}–{max(hours):,.0f}) | {ratio} | "
            f"{max(r['peak_instances'] for r in rows):.0f} |"
        )


if __name__ == "__main__":
    main()
