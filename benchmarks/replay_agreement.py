"""How often replays of one rehearsal's arrivals agree with each other on their desired counts.

Not a test: it prints figures. A rehearsal's desired counts are judged against its replays
(`rehearse/agreement.py`: within max(1, 10 %) of each other on 95 % of the minutes after the
first scale-out, a metric period's shift allowed). This asks what that yardstick can resolve:
for each thinning f (each request standing for f of the fleet's, S × K on curve instances), it
draws the rehearsal's arrivals, replays them with R seeds in the simulator (exactly what
`rehearse` replays) and prints, over every pair of replays, the share of minutes that agree and
how many pairs reach 95 %. Pure computation over the reference artifacts; no local cloud.

    PYTHONPATH=.:container .venv/bin/python benchmarks/replay_agreement.py \\
        --plan measurements/plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json --thinning 80 20 5
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.rehearse.agreement import REQUIRED_SHARE, desired_agreement
from tts_bench.rehearse.arrivals import TrafficSpec, rehearsal_arrivals
from tts_bench.rehearse.replay import ReplaySetup, desired_steps, replay_arrivals
from tts_bench.rehearse.runs import simulated_alarms

REPO = Path(__file__).resolve().parent.parent
M = REPO / "measurements"
QMAX = "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
TTOTAL = "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
RAMP = "diurnal:13.7757:275.514:7200"  # the acceptance run's two-hour ramp at λ_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--qmax", type=Path, default=M / QMAX)
    parser.add_argument("--ttotal", type=Path, default=M / TTOTAL)
    parser.add_argument("--synthetic", default=RAMP)
    parser.add_argument("--thinning", type=float, nargs="+", default=[80.0])
    parser.add_argument("--replays", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-instances", type=int, default=40)
    args = parser.parse_args()
    plan = load_artifact(args.plan, PlanArtifact)
    qmax = load_artifact(args.qmax, QmaxArtifact)
    ttotal = load_artifact(args.ttotal, TtotalArtifact)
    started = time.process_time()
    print(f"plan {plan.plan_id} ({plan.rule}), {args.synthetic}, {args.replays} replays")
    print(
        "| thinning f | arrivals | shift s | pairs | share of minutes, median (min–max) | ≥ 95 % |"
    )
    print("|---:|---:|---:|---:|---|---:|")
    for thinning in args.thinning:
        setup = ReplaySetup.of(plan, qmax, ttotal, (1, args.max_instances), 1, thinning)
        spec = TrafficSpec(args.synthetic, None, None)
        arrivals = rehearsal_arrivals(spec, thinning, setup.shape.surge_hold_s, args.seed)
        runs = [
            replay_arrivals(setup, arrivals.times_s, arrivals.duration_s, args.seed + k)
            for k in range(args.replays)
        ]
        shift = max(a.rule.period_s for a in simulated_alarms(setup.shape) if a.scales_out)
        lines = [desired_steps(run, 1) for run in runs]
        firsts = [next((t for t, a in run.actions if a.out), None) for run in runs]
        from_s = min((t for t in firsts if t is not None), default=0.0)
        shares = []
        for a, b in itertools.combinations(lines, 2):
            minutes, agreeing = desired_agreement(a, b, from_s, arrivals.duration_s, shift, 1)
            shares.append(agreeing / minutes if minutes else 1.0)
        s = np.array(shares)
        enough = s >= REQUIRED_SHARE
        print(
            f"| {thinning:g} | {arrivals.count:,} | {shift:g} | {len(s)} | {np.median(s):.3f} "
            f"({s.min():.3f}–{s.max():.3f}) | {int(enough.sum())} ({enough.mean():.0%}) |",
            flush=True,
        )
    print(f"{time.process_time() - started:.0f} CPU s")


if __name__ == "__main__":
    main()
