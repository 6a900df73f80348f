"""Cross-check: the plan's surge_survival finding against the fleet model (issue 17, item 4).

surge_survival (planning/birth_death.py) puts one instance at C_scale_max, offers it
surge_ratio × X(C_scale_max) and asks how often it reaches Q_max before T_total ends. Here a
fleet of N instances is offered N × X(C_scale_max) (what the plan sizes each instance for),
stepping to × surge_ratio at 30 min for one planned T_total, under `fixed:N` (no new capacity
within T_total, the birth–death model's assumption) and under `plan` and `plan+burst`. For each,
over SEEDS runs: the share of runs that shed during the surge, and the shed share of the surge's
arrivals, beside the birth–death probability and the full-queue figure
1 − X(Q_max) / (ratio × X(C_scale_max)).

    PYTHONPATH=.:container python benchmarks/simulate_surge_check.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tts_bench.simulate.from_files import SimulationRequest, load_inputs
from tts_bench.simulate.policies import parse_policy
from tts_bench.simulate.replay import run_fleet_model
from tts_bench.simulate.traffic import parse_synthetic, synthetic_traffic

M = Path(__file__).resolve().parent.parent / "measurements"
SEEDS = range(12)
AT_S = 1800.0


def main() -> None:
    inputs = load_inputs(
        SimulationRequest(
            plan=M / "plan-kokoro-82m-g5xlarge-8b1b96bc.json",
            qmax=M / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json",
            ttotal=M / "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json",
            trace=None,
            synthetic=None,
            duration_s=None,
            policies=(),
            seed=1,
            price_per_hour_usd=None,
            out=M,
        )
    )
    shape, curves, x_trigger = inputs.shape, inputs.curves, inputs.throughput_at_trigger_rps
    finding = inputs.plan.finding("surge_survival")
    fluid = 1 - curves.service_rps[shape.queue_max_depth] / (shape.surge_ratio * x_trigger)
    print(
        f"birth-death (plan finding): P(reach Q_max within T_total) = {finding.figure('shed_probability'):.3f}; "
        f"full-queue shed share of the surge = {fluid:.3f}"
    )
    print(
        "| N | policy | runs that shed in the surge | surge shed share (mean) | whole-run shed share |"
    )
    print("|---:|---|---:|---:|---:|")
    for instances in (1, 3, 10, 50):
        for policy in (f"fixed:{instances}", "plan", "plan+burst"):
            hit, share, whole = [], [], []
            for seed in SEEDS:
                rng = np.random.default_rng(seed)
                spec = f"surge:{instances * x_trigger}:{shape.surge_ratio}:{AT_S}"
                traffic = synthetic_traffic(
                    parse_synthetic(spec), AT_S + 2 * shape.surge_hold_s, shape.surge_hold_s, rng
                )
                chosen = parse_policy(policy, inputs.plan, shape, curves)
                run = run_fleet_model(curves, shape, chosen, traffic, x_trigger, rng)
                line = run.timeline
                surge = (line.end_s > AT_S) & (line.end_s <= AT_S + shape.surge_hold_s + 10)
                hit.append(line.shed[surge].sum() > 0)
                share.append(line.shed[surge].sum() / line.offered[surge].sum())
                whole.append(run.shed / run.requests)
            print(
                f"| {instances} | {policy} | {int(np.sum(hit))}/{len(SEEDS)} | {np.mean(share):.4f} | {np.mean(whole):.4f} |"
            )


if __name__ == "__main__":
    main()
