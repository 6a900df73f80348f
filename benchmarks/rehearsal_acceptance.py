"""Issue 28's acceptance, with the commands a user runs: the reference artifacts' two plans
rehearsed on curve instances of the reference ladder over a compressed two-hour ramp from 1 to
20 instances' worth of load and back, and the organic T_total of each plan.

Each run starts its own `tts-bench local-cloud --instance-model curve` (a fresh fleet, fresh
alarms and cooldowns), waits for its env file, runs `tts-bench rehearse` or `tts-bench ttotal
--trigger organic` against it with only that env, and stops it. One instance's worth of load is
the fleet plan's scale-out level λ_out (13.7757 requests/s: where the default rule holds each
instance), so the ramp is diurnal:13.7757:275.515:7200 for both plans.

    PYTHONPATH=. .venv/bin/python benchmarks/rehearsal_acceptance.py --out measurements/rehearsal \
        [--seeds 1 2] [--rate-scale 8] [--time-scale 10] [--skip-rehearsals] [--skip-organic]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
M = REPO / "measurements"
QMAX = M / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
PLANS = {
    "fleet": M / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json",
    "published": M / "plan-kokoro-82m-g5xlarge-8b1b96bc.json",
}
LAMBDA_OUT = 13.7757  # the fleet plan's scale-out level, requests/s per instance
RAMP = f"diurnal:{LAMBDA_OUT:g}:{20 * LAMBDA_OUT:g}:7200"
TOOL = [sys.executable, "-m", "tts_bench"]


class Cloud:
    """`tts-bench local-cloud` in a child process, until stopped."""

    def __init__(self, plan: Path, log: Path, *flags: str) -> None:
        self.env_file = log.with_suffix(".env")
        self.env_file.unlink(missing_ok=True)
        command = [
            *TOOL,
            "local-cloud",
            "--instance-model",
            "curve",
            "--qmax",
            str(QMAX),
            "--plan",
            str(plan),
            "--env-file",
            str(self.env_file),
            *flags,
        ]
        self.log = log.open("w")
        self.process = subprocess.Popen(command, cwd=REPO, stdout=self.log, stderr=self.log)

    def env(self) -> dict[str, str]:
        deadline = time.time() + 300
        while not self.env_file.exists():
            if self.process.poll() is not None or time.time() > deadline:
                raise SystemExit(f"the local cloud did not start; see {self.log.name}")
            time.sleep(1)
        values = dict(
            line.split("=", 1) for line in self.env_file.read_text().splitlines() if "=" in line
        )
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TTS_BENCH_T"))}
        return {**base, **values}

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self.log.close()


def run(command: list[str], env: dict[str, str], log: Path) -> int:
    print("$", " ".join(command[2:]), flush=True)
    with log.open("a") as handle:
        done = subprocess.run(command, cwd=REPO, env=env, stdout=handle, stderr=handle)
    print(f"  exit {done.returncode}; output in {log}", flush=True)
    return done.returncode


def rehearsal(rule: str, seed: int, args: argparse.Namespace) -> None:
    log = args.out / f"rehearse-{rule}-seed{seed}.log"
    cloud = Cloud(
        PLANS[rule],
        args.out / f"cloud-rehearse-{rule}-seed{seed}.log",
        "--rate-scale",
        str(args.rate_scale),
        "--time-scale",
        str(args.time_scale),
        "--max-instances",
        "40",
        "--seed",
        str(seed),
    )
    try:
        command = [
            *TOOL,
            "rehearse",
            "--plan",
            str(PLANS[rule]),
            "--endpoint",
            "speech-kokoro-82m",
            "--synthetic",
            RAMP,
            "--seed",
            str(seed),
            "--replays",
            "20",
            "--price-per-hour",
            "1.408",
            "--out",
            str(args.out),
        ]
        run(command, cloud.env(), log)
    finally:
        cloud.stop()


def organic(rule: str, load_factor: float, min_instances: int, args: argparse.Namespace) -> None:
    name = f"organic-{rule}-x{load_factor:g}-min{min_instances}"
    cloud = Cloud(
        PLANS[rule],
        args.out / f"cloud-{name}.log",
        "--rate-scale",
        "1",
        "--time-scale",
        "10",
        "--max-instances",
        "20",
        "--min-instances",
        str(min_instances),
        "--seed",
        "1",
    )
    out = args.out / name
    out.mkdir(parents=True, exist_ok=True)
    try:
        command = [
            *TOOL,
            "ttotal",
            "--trigger",
            "organic",
            "--endpoint",
            "speech-kokoro-82m",
            "--qmax",
            str(QMAX),
            "--plan",
            str(PLANS[rule]),
            "--load-factor",
            str(load_factor),
            "--out",
            str(out),
        ]
        run(command, cloud.env(), args.out / f"{name}.log")
    finally:
        cloud.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rules", nargs="+", default=["fleet", "published"])
    parser.add_argument("--rate-scale", type=float, default=8.0)
    parser.add_argument("--time-scale", type=float, default=10.0)
    parser.add_argument("--skip-rehearsals", action="store_true")
    parser.add_argument("--skip-organic", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.time()
    if not args.skip_organic:
        organic("published", 1.2, 1, args)
        organic("fleet", 1.2, 1, args)
        organic("fleet", 1.2, 3, args)
    if not args.skip_rehearsals:
        for seed in args.seeds:
            for rule in args.rules:
                rehearsal(rule, seed, args)
    print(f"done in {(time.time() - began) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
