"""Where a loaded curve cloud's memory grows (issue 40's soak): RSS beside Python's blocks and
glibc's main arena, sampled in the cloud's own process.

Not a test: it prints samples and the growth a wall minute over the second half of the run. It
runs `tts-bench local-cloud --instance-model curve` as the soak does (the reference ladder and
published plan, `--rate-scale 10 --time-scale 60 --max-instances 8`) in this process, and starts
itself again as a child (`--drive`) that sends load waves through boto3's response stream:
`--wave-rps` good requests/s for a minute, then 1/s for a minute. Python blocks that grow while
the arena's in-use bytes stay flat point at Python objects, not at malloc fragmentation.

    PYTHONPATH=.:container python benchmarks/curve_cloud_growth.py [--seconds 600] [--wave-rps 8] [--census]

`--census` also says which Python objects grow: the gc's container objects counted by type, and
tracemalloc's lines (started at a quarter of the run, so warm-up is not counted), each compared
between the half-way mark and the end. Both slow the cloud; read its growth rates beside them.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MEASUREMENTS = REPO / "measurements"
CLOUD_ARGS = [
    "local-cloud", "--instance-model", "curve",
    "--qmax", str(MEASUREMENTS / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"),
    "--plan", str(MEASUREMENTS / "plan-kokoro-82m-g5xlarge-8b1b96bc.json"),
    "--rate-scale", "10", "--time-scale", "60", "--max-instances", "8", "--seed", "1",
]  # fmt: skip


_MALLINFO2_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t) for name in (*_MALLINFO2_FIELDS, "uordblks", "fordblks", "keepcost")
    ]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sample(libc: ctypes.CDLL, t0: float) -> dict[str, float]:
    info = libc.mallinfo2()
    return {
        "t_s": round(time.monotonic() - t0),
        "rss_mib": round(rss_mib(), 1),
        "arena_in_use_mib": round(info.uordblks / 2**20, 2),
        "python_blocks": sys.getallocatedblocks(),
        "threads": threading.active_count(),
    }


def drive(seconds: float, wave_rps: float) -> None:
    """The child: load waves at the cloud whose AWS_* variables it was given."""
    import boto3
    from botocore.config import Config

    # Bounded: one request that never ends must not keep the run from reporting.
    config = Config(read_timeout=30, connect_timeout=5, retries={"max_attempts": 1})
    runtime = boto3.client("sagemaker-runtime", config=config)
    counts = {"ok": 0, "failed": 0}

    def one() -> None:
        body = {
            "context_id": uuid.uuid4().hex, "transcript": "Thank you for calling.",
            "language": "en", "voice": {"mode": "id", "id": "af_heart"},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        }  # fmt: skip
        try:
            answer = runtime.invoke_endpoint_with_response_stream(
                EndpointName="speech-kokoro-82m", Body=json.dumps(body).encode(),
                ContentType="application/json",
            )  # fmt: skip
            for _ in answer["Body"]:
                pass
            counts["ok"] += 1
        except Exception:  # a refusal or a cut is counted, not raised
            counts["failed"] += 1

    t0 = time.monotonic()
    pool = ThreadPoolExecutor(48)
    while (elapsed := time.monotonic() - t0) < seconds:
        pool.submit(one)
        time.sleep(1 / (wave_rps if int(elapsed // 60) % 2 == 0 else 1.0))
    pool.shutdown(wait=True, cancel_futures=True)  # what has not started by now is not sent
    print(json.dumps(counts), flush=True)


def census() -> Counter[str]:
    """The gc's tracked objects by type (containers only: str, bytes and ints are not tracked)."""
    import gc

    gc.collect()
    return Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())


def print_growth(before: Counter[str], after: Counter[str], snaps: list[Any]) -> None:
    grown = Counter({k: after[k] - before[k] for k in after if after[k] > before[k]})
    print("objects that grew over the second half (type: count added):", file=sys.stderr)
    for name, added in grown.most_common(15):
        print(f"  {name}: +{added} ({before[name]} -> {after[name]})", file=sys.stderr)
    if len(snaps) == 2:
        print("allocations that grew over the second half (tracemalloc, by line):", file=sys.stderr)
        for stat in snaps[1].compare_to(snaps[0], "lineno")[:15]:
            print(f"  {stat}", file=sys.stderr)


def watch(seconds: float, wave_rps: float, exports: threading.Event, by_type: bool) -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    exports.wait()
    t0 = time.monotonic()
    child = subprocess.Popen([sys.executable, __file__, "--drive", "--seconds", str(seconds),
                              "--wave-rps", str(wave_rps)], env={**os.environ, **CLOUD_ENV})  # fmt: skip
    samples = []
    counts: list[Counter[str]] = []
    snaps: list[Any] = []
    while time.monotonic() - t0 < seconds:
        time.sleep(15)
        samples.append(sample(libc, t0))
        print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
        elapsed = time.monotonic() - t0
        if by_type and not tracemalloc.is_tracing() and elapsed >= seconds / 4:
            tracemalloc.start()
        if by_type and not counts and elapsed >= seconds / 2:
            counts.append(census())
            snaps.append(tracemalloc.take_snapshot())
    if by_type and counts:
        counts.append(census())
        snaps.append(tracemalloc.take_snapshot())
        tracemalloc.stop()
        print_growth(counts[0], counts[1], snaps)
    try:
        child.wait(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        print("the load's child did not end within 60 s of the run: killed", file=sys.stderr)
    half = [s for s in samples if s["t_s"] >= seconds / 2]
    minutes = (half[-1]["t_s"] - half[0]["t_s"]) / 60
    for key in ("rss_mib", "arena_in_use_mib", "python_blocks"):
        print(f"{key}: {(half[-1][key] - half[0][key]) / minutes:+.2f} a wall minute "
              f"over the second half ({half[0][key]} -> {half[-1][key]})")  # fmt: skip
    os.kill(os.getpid(), signal.SIGINT)  # the local cloud stops as on Ctrl-C


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="load and sampling time")
    parser.add_argument("--wave-rps", type=float, default=8.0, help="good requests/s in a wave")
    parser.add_argument("--census", action="store_true", help="which objects grow (slower)")
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        drive(args.seconds, args.wave_rps)
        return 0
    # The cloud prints `export K=V` for its clients once it is up: read there, for the child.
    exports = threading.Event()
    sys.stdout = _Exports(sys.stdout, exports)
    threading.Thread(
        target=watch, args=(args.seconds, args.wave_rps, exports, args.census), daemon=True
    ).start()
    # `python -m tts_bench local-cloud …` run in this process, as a user runs the command.
    sys.argv = ["tts-bench", *CLOUD_ARGS]
    runpy.run_module("tts_bench", run_name="__main__")
    return 0


CLOUD_ENV: dict[str, str] = {}


class _Exports:
    """stdout as it was, with each `export K=V` line also kept in CLOUD_ENV."""

    def __init__(self, stream: Any, done: threading.Event) -> None:
        self.stream, self.done = stream, done

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.startswith("export ") and "=" in line:
                key, value = line.removeprefix("export ").split("=", 1)
                CLOUD_ENV[key] = value
        if "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME" in CLOUD_ENV:
            self.done.set()
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


if __name__ == "__main__":
    sys.exit(main())
