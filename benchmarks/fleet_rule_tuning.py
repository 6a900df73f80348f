"""Tuning the fleet rule's constants on simulated days, beside the published rule.

For each candidate (a margin floor and whether the burst step is deployed), derives the fleet plan of
the reference artifacts with those constants (in this process only: the committed values live
in `tts_bench/planning/fleet_rule.py`), simulates it and the published plan over seeds 1..N of
each traffic shape, and prints the mean and spread of shed share, instance-hours and peak, with
the instance-hours as a ratio of the published rule's on the same days. Two processes share the
seeds; CPU seconds are printed with the load average.

`--variant NAME` also simulates the derived fleet plan with its deploy shape edited as
`VARIANTS` says (designs the simulator was asked about; none of them is deployable as
written: the extra invocations step has no role in the schema). `step-scale-in` is the design
before the fleet-aware scale-in: the same step on plain InvocationsPerInstance at 99 % of the
target, on every fleet size, target tracking's scale-in disabled.

    PYTHONPATH=.:container python benchmarks/fleet_rule_tuning.py [--seeds 5] \\
        [--margin 0.05 --margin 0.03 ...] [--burst on --burst off] [--shape SPEC ...] \\
        [--variant previous --variant floor-4 ...] [--aws-semantics documented ...]

Every row is simulated under each `--aws-semantics` set (default: documented and pessimistic,
docs/aws-semantics.md); × published compares with the published rule under the same set.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.plan import (
    AlarmSpec,
    PlanArtifact,
    SourceArtifact,
    StepAdjustment,
    StepSpec,
)
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.planning import fleet_rule
from tts_bench.planning.aws.semantics import NAMED
from tts_bench.planning.birth_death import stationary_occupancy
from tts_bench.planning.curve import throughput_curve
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


def _burst_edit(plan: PlanArtifact, **alarm: float) -> dict[str, object]:
    """The burst step's MinAdjustmentMagnitude and alarm fields replaced."""
    minimum = alarm.pop("min_adjustment_magnitude", None)
    one_step = alarm.pop("one_step", False)
    policies = []
    for policy in plan.deploy.policies:  # type: ignore[union-attr]
        if isinstance(policy, StepSpec) and policy.role == "burst":
            update: dict[str, object] = {"alarm": policy.alarm.model_copy(update=alarm)}
            if minimum is not None:
                update["min_adjustment_magnitude"] = int(minimum)
            if one_step:  # the first step only, open above
                first = policy.steps[0].model_copy(update={"upper": None})
                update["steps"] = [first]
            policy = policy.model_copy(update=update)
        policies.append(policy)
    return {"policies": policies}


def _invocations_step(plan: PlanArtifact, factor: float = 1.0) -> StepSpec:
    """A step policy on InvocationsPerInstance (Sum, 60 s) that acts on ONE datapoint above the
    target (target tracking waits for three), adding `factor` × the excess in 5 % steps."""
    target = plan.scaling_target_value
    steps = [
        StepAdjustment(
            lower=i * 0.05 * target,
            upper=None if i == 59 else (i + 1) * 0.05 * target,
            adjustment=max(1, math.ceil(100 * factor * (i + 1) * 0.05 - 1e-9)),
        )
        for i in range(60)
    ]
    alarm = AlarmSpec(
        metric="InvocationsPerInstance", statistic="Sum", period_s=60, evaluation_periods=1,
        datapoints_to_alarm=1, comparison="GreaterThanThreshold", threshold=target,
        treat_missing_data="missing",
    )  # fmt: skip
    # model_construct: the schema has no role for it (it is a candidate, not a rule).
    return StepSpec.model_construct(
        kind="step", role="invocations-step", adjustment_type="PercentChangeInCapacity",
        steps=steps, cooldown_s=math.ceil(plan.deploy.launch_s + 120),  # type: ignore[union-attr]
        metric_aggregation_type="Maximum", min_adjustment_magnitude=1, alarm=alarm,
    )  # fmt: skip


def _invocations_scale_in(plan: PlanArtifact) -> dict[str, object]:
    """A step scale-in on InvocationsPerInstance (Sum, 60 s; an alarm of our own, 3 of 3
    datapoints below 99 % of the target, Average of them) that removes k % where the value is
    k % below the target (PercentChangeInCapacity, rounded down: lands at or under the target at
    large N; AWS rounds a removal under one instance up to one, which a small fleet cannot
    afford). Cooldown: the alarm's detection (3 periods and the publication delay), so the next
    removal reads datapoints after the last. Target tracking's own scale-in is disabled
    (DisableScaleIn): it would scale in only after its 15 minutes below 90 %."""
    target = plan.scaling_target_value
    threshold = 0.99 * target
    steps = [
        StepAdjustment(
            lower=None if k == 50 else -k * 0.01 * target,
            upper=-(k - 1) * 0.01 * target,
            adjustment=-k,
        )
        for k in range(1, 51)
    ]
    alarm = AlarmSpec(
        metric="InvocationsPerInstance", statistic="Sum", period_s=60, evaluation_periods=3,
        datapoints_to_alarm=3, comparison="LessThanThreshold", threshold=threshold,
        treat_missing_data="missing",
    )  # fmt: skip
    step = StepSpec(
        role="scale-in", adjustment_type="PercentChangeInCapacity", steps=steps,
        cooldown_s=3 * 60 + 60, metric_aggregation_type="Average", alarm=alarm,
    )  # fmt: skip
    policies: list[object] = []
    for policy in plan.deploy.policies:  # type: ignore[union-attr]
        if policy.role == "scale-in":  # the rule's own (the fleet-aware one) gives way
            continue
        if policy.kind == "target-tracking":
            policy = policy.model_copy(
                update={"disable_scale_in": True, "low_alarm": None, "scale_in_cooldown_s": None}
            )
        policies.append(policy)
    return {"policies": [*policies, step]}


def _previous(plan: PlanArtifact) -> dict[str, object]:
    """Issue 23's burst: at the occupancy one instance holds under the surge, one instance at least."""
    levels = plan.fleet
    assert levels is not None
    q = load_artifact(QMAX, QmaxArtifact)
    surge = stationary_occupancy(
        levels.surge_ratio * levels.scale_out_rps,
        throughput_curve(q.curve_rungs).at,
        plan.queue_max_depth,
    )
    return _burst_edit(plan, threshold=round(surge, 9), min_adjustment_magnitude=1, one_step=True)


def _with(*extra: StepSpec) -> Callable[[PlanArtifact, dict[str, object]], dict[str, object]]:
    return lambda plan, edit: {"policies": [*edit["policies"], *extra]}  # type: ignore[list-item]


# Deploy-shape edits of the derived fleet plan: name -> (plan -> DeployShape update, plan update).
VARIANTS: dict[str, Callable[[PlanArtifact], tuple[dict[str, object], dict[str, object]]]] = {
    "previous": lambda p: (_previous(p), {}),
    "previous+floor-4": lambda p: (_previous(p), {"min_instances": 4}),
    "previous+invocations-step": lambda p: (
        _with(_invocations_step(p))(p, _previous(p)),
        {},
    ),
    "burst-at-c-min-1": lambda p: (_burst_edit(p, min_adjustment_magnitude=1), {}),
    "rule-one-step": lambda p: (_burst_edit(p, one_step=True), {}),
    "burst-at-6.75": lambda p: (_burst_edit(p, threshold=6.75), {}),
    "burst-at-8.59-3-datapoints": lambda p: (
        _burst_edit(p, threshold=8.59, evaluation_periods=3, datapoints_to_alarm=3),
        {},
    ),
    "rule+floor-4": lambda p: (_burst_edit(p), {"min_instances": 4}),
    "rule+invocations-step": lambda p: (_with(_invocations_step(p))(p, _burst_edit(p)), {}),
    "step-scale-in": lambda p: (_invocations_scale_in(p), {}),
}


def variant_plan(name: str, plan: PlanArtifact) -> PlanArtifact:
    deploy_update, plan_update = VARIANTS[name](plan)
    deploy = plan.deploy.model_copy(update=deploy_update)  # type: ignore[union-attr]
    return plan.model_copy(update={"deploy": deploy, **plan_update})


def one(job: tuple[str, float, bool, str, int, str, dict, str]) -> tuple[tuple, dict, float]:
    rule, margin, burst, spec, seed, qmax, request, semantics = job
    if rule.startswith("file:"):  # a plan file edited by hand (a candidate design)
        plan = load_artifact(Path(rule.split("=", 1)[1]), PlanArtifact)
    elif rule.startswith("variant:"):
        plan = variant_plan(
            rule.removeprefix("variant:"),
            plan_of("fleet", margin, burst, Path(qmax), TTOTAL, **request),
        )
    else:
        plan = plan_of(rule, margin, burst, Path(qmax), TTOTAL, **request)
    cpu = time.process_time()
    traffic = (
        CheckTraffic(trace=Path(spec.removeprefix("trace:")))
        if spec.startswith("trace:")
        else CheckTraffic(spec)
    )
    figures = day_figures(
        plan, load_artifact(Path(qmax), QmaxArtifact), traffic, seed, NAMED[semantics]
    )
    return (rule, margin, burst, spec, semantics), figures.model_dump(), time.process_time() - cpu


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
    parser.add_argument("--aws-semantics", action="append", choices=sorted(NAMED))
    parser.add_argument("--variant", action="append", default=[], choices=sorted(VARIANTS))
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
    sets = args.aws_semantics or ["documented", "pessimistic"]
    jobs: list[tuple[str, float, bool, str, int, str, dict]] = [
        ("fleet", m, b, spec, seed, args.qmax, request)
        for m, b, spec, seed in itertools.product(margins, bursts, shapes, seeds)
    ]
    jobs += [
        (f"file:{entry}", 0.0, False, spec, s, args.qmax, request)
        for entry in args.plan_file
        for spec in shapes
        for s in seeds
    ]
    jobs += [
        (f"variant:{name}", fleet_rule.FLEET_MARGIN_FLOOR, fleet_rule.FLEET_BURST, spec, s,
         args.qmax, request)
        for name in args.variant
        for spec in shapes
        for s in seeds
    ]  # fmt: skip
    if not args.no_published:
        jobs += [
            ("published", 0.0, False, spec, s, args.qmax, request) for spec in shapes for s in seeds
        ]
    runs = [(*job, semantics) for semantics in sets for job in jobs]
    load = os.getloadavg()[0]
    wall = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one, runs))
    by: dict[tuple, list[dict]] = {}
    cpu = 0.0
    for key, figures, seconds in results:
        by.setdefault(key, []).append(figures)
        cpu += seconds
    print(
        f"{len(runs)} policy-days, {cpu:.0f} CPU s, {time.perf_counter() - wall:.0f} s wall; "
        f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        "| AWS | shape | rule | margin | burst | shed % mean (min–max) | requests shed, mean "
        "| instance-h mean (min–max) | × published | peak |"
    )
    print("|---|---|---|---:|---|---:|---:|---:|---:|---:|")
    for key, rows in by.items():
        rule, margin, burst, spec, semantics = key
        base = by.get(("published", 0.0, False, spec, semantics))
        shed = [100 * r["shed_share"] for r in rows]
        hours = [r["instance_hours"] for r in rows]
        ratio = (
            f"{statistics.mean(hours) / statistics.mean(r['instance_hours'] for r in base):.3f}"
            if base
            else "-"
        )
        if rule.startswith("file:"):
            rule = rule.removeprefix("file:").split("=", 1)[0]
        rule = rule.removeprefix("variant:")
        print(
            f"| {semantics} | {spec} | {rule} | {margin if rule == 'fleet' else '-'} | "
            f"{('on' if burst else 'off') if rule == 'fleet' else '-'} | "
            f"{statistics.mean(shed):.4f} ({min(shed):.4f}–{max(shed):.4f}) | "
            f"{statistics.mean(r['shed'] for r in rows):,.0f} | "
            f"{statistics.mean(hours):,.0f} ({min(hours):,.0f}–{max(hours):,.0f}) | {ratio} | "
            f"{max(r['peak_instances'] for r in rows):.0f} |"
        )


if __name__ == "__main__":
    main()
