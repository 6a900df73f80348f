"""Curve-instance local cloud: CPU per request at a rehearsal's rates, 50 instances on 2 cores.

Not a test: it prints figures. It starts `tts-bench local-cloud --instance-model curve` (the
reference ladder, `--instances N`, `--rate-scale S`, `--time-scale 10`, no plan: a fixed fleet)
as a child process and, once it is InService, sends open-loop Poisson arrivals through boto3's
`invoke_endpoint_with_response_stream` at each `--rate` for `--seconds`, one rate after another.
Per rate it reads the child's CPU time (user + system: moto, the runtime, the curve instances,
metrics, autoscaling, log shipping) and this process's (the clients), each divided by the
requests sent, beside the baseline: the local cloud's runtime CPU per request with process
instances, 31 ms (measurements/lab/local-cloud-bench.md, quiet machine, its instance not included).

    PYTHONPATH=.:container python benchmarks/curve_cloud_bench.py [--instances 50]
        [--rate-scale 10] [--rate 10 --rate 20 --rate 40] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import psutil
from botocore.config import Config

REPO = Path(__file__).resolve().parents[1]
QMAX = REPO / "measurements" / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
TTOTAL = REPO / "measurements" / "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
BASELINE_MS = 31.0  # process instances: runtime CPU per request (local-cloud-bench.md)
BODY = json.dumps(
    {
        "context_id": "bench",
        "transcript": "Thank you for calling. How can I help you today?",
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }
)


def start_cloud(args: argparse.Namespace, env_file: Path) -> tuple[subprocess.Popen[str], dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "container")]))
    command = [
        sys.executable, "-m", "tts_bench", "local-cloud", "--instance-model", "curve",
        "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--instances", str(args.instances),
        "--rate-scale", str(args.rate_scale), "--time-scale", "10", "--seed", "1",
        "--env-file", str(env_file),
    ]  # fmt: skip
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 300
    while not env_file.exists():
        if child.poll() is not None or time.time() > deadline:
            raise SystemExit(f"the local cloud did not start: {child.stderr.read()[-2000:]}")
        time.sleep(0.5)
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return child, values


def run_rate(client: object, endpoint: str, rate: float, seconds: float, seed: int) -> dict:
    outcomes: list[str] = []
    ttfab: list[float] = []
    lock = threading.Lock()

    def one() -> None:
        began = time.perf_counter()
        first = None
        try:
            answer = client.invoke_endpoint_with_response_stream(  # type: ignore[attr-defined]
                EndpointName=endpoint, Body=BODY, ContentType="application/json"
            )
            for event in answer["Body"]:
                if "PayloadPart" in event and first is None:
                    first = time.perf_counter() - began
            outcome = "ok"
        except Exception as exc:
            outcome = "503" if "queue_saturated" in str(exc) else type(exc).__name__
        with lock:
            outcomes.append(outcome)
            if first is not None:
                ttfab.append(first)

    rng = random.Random(seed)
    pool = ThreadPoolExecutor(256)
    due = time.monotonic()
    end = due + seconds
    while True:
        due += rng.expovariate(rate)
        if due >= end:
            break
        time.sleep(max(0.0, due - time.monotonic()))
        pool.submit(one)
    pool.shutdown(wait=True)
    return {"outcomes": outcomes, "ttfab": ttfab}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--rate-scale", type=float, default=10.0)
    parser.add_argument("--rate", type=float, action="append")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    rates = args.rate or [10.0, 20.0, 40.0]
    with tempfile.TemporaryDirectory() as tmp:
        child, env = start_cloud(args, Path(tmp) / "cloud.env")
        try:
            cloud = psutil.Process(child.pid)
            me = psutil.Process()
            client = boto3.client(
                "sagemaker-runtime",
                endpoint_url=env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"],
                region_name=env["AWS_REGION"],
                aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                config=Config(max_pool_connections=256, retries={"max_attempts": 1}),
            )
            time.sleep(5)  # let the start-up's own work settle
            print(
                f"{args.instances} curve instances, rate scale {args.rate_scale:g} "
                f"(X(n)/{args.rate_scale:g} each), {args.seconds:g} s per rate; load "
                f"{os.getloadavg()[0]:.2f} at start"
            )
            print(
                "| rate rps | requests | ok | shed | TTFAB p50 ms | cloud CPU ms/request | "
                "client CPU ms/request | cloud / baseline (31 ms) |"
            )
            print("|---:|---:|---:|---:|---:|---:|---:|---:|")
            for index, rate in enumerate(rates):
                c0, m0 = cloud.cpu_times(), me.cpu_times()
                got = run_rate(client, "speech-kokoro-82m", rate, args.seconds, index + 1)
                c1, m1 = cloud.cpu_times(), me.cpu_times()
                n = len(got["outcomes"])
                cloud_ms = 1000 * ((c1.user + c1.system) - (c0.user + c0.system)) / n
                client_ms = 1000 * ((m1.user + m1.system) - (m0.user + m0.system)) / n
                p50 = statistics.median(got["ttfab"]) * 1000 if got["ttfab"] else float("nan")
                print(
                    f"| {rate:g} | {n} | {got['outcomes'].count('ok')} | "
                    f"{got['outcomes'].count('503')} | {p50:.0f} | {cloud_ms:.1f} | "
                    f"{client_ms:.1f} | {cloud_ms / BASELINE_MS:.2f} |"
                )
            print(f"load {os.getloadavg()[0]:.2f} at the end")
        finally:
            child.terminate()
            child.wait(timeout=60)


if __name__ == "__main__":
    main()
