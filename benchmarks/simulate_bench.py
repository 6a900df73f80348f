"""Benchmark: the fleet model over a fleet day, and against the request-level model per arrival.

Prints one run's figures: the fleet day (`diurnal:10:5000:86400`, policy `plan`, the reference
artifacts) against the 60 s budget and the 10 s moonshot, and both models on one small case
(`steady:50` on `fixed:3` for 20 minutes) in arrivals per CPU second, as a ratio. Wall time
depends on what else runs on the machine; CPU time much less, so both are printed with the
load average.

    PYTHONPATH=.:container python benchmarks/simulate_bench.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from tts_bench.simulate.fleet import compile_fleet_model
from tts_bench.simulate.from_files import SimulationRequest, load_inputs
from tts_bench.simulate.policies import parse_policy
from tts_bench.simulate.replay import run_fleet_model, run_request_model
from tts_bench.simulate.traffic import parse_synthetic, synthetic_traffic

REPO = Path(__file__).resolve().parent.parent
M = REPO / "measurements"
BUDGET_S, MOONSHOT_S = 60.0, 10.0


def timed(run):  # -> (result, wall s, cpu s)
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


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
            out=REPO,
        )
    )
    _, compile_wall, _ = timed(compile_fleet_model)

    def run(model, policy: str, spec: str, duration_s: float, seed: int):
        rng = np.random.default_rng(seed)
        traffic = synthetic_traffic(
            parse_synthetic(spec), duration_s, inputs.shape.surge_hold_s, rng
        )
        chosen = parse_policy(policy, inputs.plan, inputs.shape, inputs.curves)
        return timed(
            lambda: model(
                inputs.curves, inputs.shape, chosen, traffic, inputs.throughput_at_trigger_rps, rng
            )
        )

    load_before = os.getloadavg()[0]
    day, day_wall, day_cpu = run(run_fleet_model, "plan", "diurnal:10:5000:86400", 86400, 1)
    load_after = os.getloadavg()[0]
    small_fleet, _, fleet_cpu = run(run_fleet_model, "fixed:3", "steady:50", 1200, 2)
    small_ref, _, ref_cpu = run(run_request_model, "fixed:3", "steady:50", 1200, 2)

    print(
        f"{os.cpu_count()} cores, load average {load_before:.1f} before / {load_after:.1f} after the day"
    )
    print(f"numba compile or cache load: {compile_wall:.1f} s (not in the figures below)\n")
    print(
        "| fleet day: diurnal:10:5000:86400, plan, seed 1 | figure | vs 60 s budget | vs 10 s moonshot |"
    )
    print("|---|---:|---:|---:|")
    print(
        f"| wall seconds | {day_wall:.1f} | {day_wall / BUDGET_S:.2f} | {day_wall / MOONSHOT_S:.2f} |"
    )
    print(
        f"| CPU seconds | {day_cpu:.1f} | {day_cpu / BUDGET_S:.2f} | {day_cpu / MOONSHOT_S:.2f} |"
    )
    print(f"| arrivals | {day.requests:,} | | |")
    print(f"| peak instances | {day.peak_instances} | | |")
    print(f"| ns of CPU per arrival | {day_cpu / day.requests * 1e9:.0f} | | |\n")
    fleet_rate = small_fleet.requests / fleet_cpu
    ref_rate = small_ref.requests / ref_cpu
    print(
        "| steady:50 on fixed:3, 20 min | fleet model | request-level model | fleet / request-level |"
    )
    print("|---|---:|---:|---:|")
    print(
        f"| arrivals per CPU second | {fleet_rate:,.0f} | {ref_rate:,.0f} | {fleet_rate / ref_rate:.0f} |"
    )
    print(
        f"| shed share | {small_fleet.shed / small_fleet.requests:.4f} | {small_ref.shed / small_ref.requests:.4f} | |"
    )


if __name__ == "__main__":
    main()
