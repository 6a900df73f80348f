"""Where a plan's instance-hours go on one seed's day: two-hour buckets against a clairvoyant fleet.

Simulates one plan (a plan file, or a design variant of the derived fleet plan as
`fleet_rule_tuning.py` names them) with `--policy plan` on one seed's day under one reading of
AWS, and prints, per two hours: the instance-hours provisioned, those of a fleet that knows the
arrivals and holds each minute the fewest instances that keep every one at or under a given load
(default: the fleet plan's λ_out), the difference, the mean load per serving instance as a share
of that level, and the scaling actions by policy and direction. Then the shed periods, if any.

    PYTHONPATH=.:container python benchmarks/fleet_rule_hours.py \\
        (--plan FILE | --variant NAME) [--seed 1] [--aws-semantics documented] \\
        [--shape SPEC] [--level-rps R]
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

import numpy as np
from fleet_rule_tuning import QMAX, REFERENCE_DAY, TTOTAL, plan_of, variant_plan

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.planning import fleet_rule
from tts_bench.planning.aws.semantics import NAMED
from tts_bench.simulate.check import CheckTraffic
from tts_bench.simulate.deploy_shape import scaling_shape
from tts_bench.simulate.oracle import instances_needed
from tts_bench.simulate.policies import parse_policy
from tts_bench.simulate.replay import PolicyRun, run_fleet_model
from tts_bench.simulate.service import service_curves

BUCKET_S = 7200
MINUTE_S = 60


def simulate(
    plan: PlanArtifact, shape_spec: str, seed: int, semantics: str
) -> tuple[PolicyRun, np.ndarray]:
    """The plan's run and the day's arrivals per second (the same draw `simulate --seed` makes)."""
    shape = scaling_shape(plan, NAMED[semantics])
    curves = service_curves(load_artifact(QMAX, QmaxArtifact), shape.queue_max_depth)
    rng = np.random.default_rng(seed)
    day = CheckTraffic(shape_spec).build(plan, rng)
    policy = parse_policy("plan", plan, shape, curves)
    run = run_fleet_model(curves, shape, policy, day, shape.sizing_rps, rng.spawn(1)[0])
    return run, day.counts


def clairvoyant(counts: np.ndarray, level_rps: float, period_s: float) -> np.ndarray:
    """Instances per metric period of a fleet that holds, each minute, what `simulate`'s
    clairvoyant fleet holds (`simulate.oracle`), without its start-up lead: a lower bound
    still, by the lead's instance-hours."""
    minutes = counts[: len(counts) // MINUTE_S * MINUTE_S].reshape(-1, MINUTE_S).sum(axis=1)
    held = instances_needed(minutes / MINUTE_S, level_rps)
    return np.repeat(held, round(MINUTE_S / period_s))


def report(run: PolicyRun, counts: np.ndarray, level_rps: float) -> None:
    t = run.timeline
    period_s = float(t.end_s[1] - t.end_s[0])
    provisioned = np.concatenate([t.desired[:1], t.desired[:-1]])  # held during each period
    oracle = clairvoyant(counts, level_rps, period_s)[: len(provisioned)]
    load = t.offered / period_s / np.maximum(t.in_service, 1) / level_rps
    hours = period_s / 3600
    print(
        f"{run.policy}: {provisioned.sum() * hours:,.1f} instance-hours, clairvoyant at "
        f"{level_rps:g} rps per instance {oracle.sum() * hours:,.1f}; shed {run.shed:,} of "
        f"{run.requests:,} ({100 * run.shed / max(run.requests, 1):.4f} %)"
    )
    print("| hours | instance-h | clairvoyant | difference | load ÷ level | actions |")
    print("|---|---:|---:|---:|---:|---|")
    per_bucket = round(BUCKET_S / period_s)
    for start in range(0, len(provisioned), per_bucket):
        window = slice(start, start + per_bucket)
        begin_s, end_s = start * period_s, (start + per_bucket) * period_s
        acts = Counter(
            f"{a.policy} {'out' if a.out else 'in'}"
            for when, a in run.actions
            if begin_s < when <= end_s
        )
        own, ideal = provisioned[window].sum() * hours, oracle[window].sum() * hours
        print(
            f"| {begin_s / 3600:g}–{end_s / 3600:g} | {own:,.1f} | {ideal:,.1f} | {own - ideal:+,.1f} "
            f"| {load[window].mean():.3f} | {', '.join(f'{k}: {n}' for k, n in sorted(acts.items()))} |"
        )
    shedding = np.flatnonzero(t.shed)
    if shedding.size:
        print("shed periods (hour, requests shed, desired, in service):")
        for i in shedding[:40]:
            print(
                f"  {t.end_s[i] / 3600:.3f} h: {t.shed[i]:.0f}, {t.desired[i]:.0f}, {t.in_service[i]:.0f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--plan", type=Path)
    which.add_argument("--variant", help="a design variant of fleet_rule_tuning.py")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--aws-semantics", default="documented", choices=sorted(NAMED))
    parser.add_argument("--shape", default=REFERENCE_DAY)
    parser.add_argument("--level-rps", type=float, help="default: the fleet plan's λ_out")
    args = parser.parse_args()
    fleet = plan_of("fleet", fleet_rule.FLEET_MARGIN_FLOOR, fleet_rule.FLEET_BURST, QMAX, TTOTAL)
    plan = (
        load_artifact(args.plan, PlanArtifact)
        if args.plan is not None
        else variant_plan(args.variant, fleet)
    )
    level = args.level_rps
    if level is None:
        assert fleet.fleet is not None
        level = fleet.fleet.scale_out_rps
    if not (math.isfinite(level) and level > 0):
        parser.error("--level-rps must be a positive number")
    run, counts = simulate(plan, args.shape, args.seed, args.aws_semantics)
    report(run, counts, level)


if __name__ == "__main__":
    main()
