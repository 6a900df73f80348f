"""Benchmark: `simulate`'s trace reader on a large timestamp trace, peak memory and wall time.

Writes a sorted `timestamp_s` trace of about SIZE MB (16 M arrivals over a day for 200 MB) to a
temporary folder, then reads it with `load_trace` in a fresh process per checkout: this one,
and with `--baseline DIR` another (e.g. `git archive main | tar -x -C DIR`), side by side as
ratios. Peak RSS is the reader process's high-water mark (`VmHWM`, Linux), and what it grew by
after its imports; wall time depends on the machine's load, printed with it.

    PYTHONPATH=.:container python benchmarks/trace_reader_bench.py [--size-mb 200] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
READER = """
import json, re, sys, time
from pathlib import Path
from tts_bench.simulate.traffic import load_trace


def high_water_mib():  # this process image's own peak RSS (ru_maxrss would include its parent's)
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024


base = high_water_mib()
started = time.perf_counter()
traffic = load_trace(Path(sys.argv[1]), None)
wall = time.perf_counter() - started
peak = high_water_mib()
print(json.dumps({"arrivals": traffic.requests, "wall_s": wall,
                  "grown_mib": peak - base, "peak_mib": peak}))
"""


WRITER = """
import sys
import numpy as np
path, size_mb = sys.argv[1], float(sys.argv[2])
arrivals = int(size_mb * 1e6 / 12.9)  # "12345.678901\\n" is 13 bytes at most
times = np.sort(np.random.default_rng(1).random(arrivals) * 86400.0)
with open(path, "w") as handle:
    handle.write("timestamp_s\\n")
    for chunk in np.array_split(times, 64):
        np.savetxt(handle, chunk, fmt="%.6f")
"""


def write_trace(path: Path, size_mb: float) -> None:
    """In its own process: a reader started from this one would inherit its peak RSS."""
    subprocess.run([sys.executable, "-c", WRITER, str(path), str(size_mb)], check=True)


def read_with(tree: Path, trace: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "container")])}
    done = subprocess.run(
        [sys.executable, "-c", READER, str(trace)],
        capture_output=True, text=True, env=env, cwd=tree, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=200.0)
    parser.add_argument("--baseline", type=Path, help="another checkout's root, read the same way")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.csv"
        write_trace(trace, args.size_mb)
        size = trace.stat().st_size / 1e6
        print(f"trace: {size:.1f} MB; load average {os.getloadavg()[0]:.1f} before")
        runs = {"this checkout": read_with(REPO, trace)}
        if args.baseline is not None:
            runs["baseline"] = read_with(args.baseline.resolve(), trace)
        print(f"load average {os.getloadavg()[0]:.1f} after")
    print("| reader | arrivals | wall s | peak RSS MiB | grown MiB |")
    print("|---|---:|---:|---:|---:|")
    for name, run in runs.items():
        print(
            f"| {name} | {run['arrivals']:,} | {run['wall_s']:.1f} | {run['peak_mib']:.0f} | "
            f"{run['grown_mib']:.0f} |"
        )
    if "baseline" in runs:
        this, base = runs["this checkout"], runs["baseline"]
        print(
            f"| this / baseline | | {this['wall_s'] / base['wall_s']:.2f} | "
            f"{this['peak_mib'] / base['peak_mib']:.3f} | "
            f"{this['grown_mib'] / max(base['grown_mib'], 1e-9):.4f} |"
        )


if __name__ == "__main__":
    main()
