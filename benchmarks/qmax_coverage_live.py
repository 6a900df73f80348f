"""Issue 38's acceptance run: live ladders against a serial curve instance of known truth.

Not a test: it prints one row per ladder and the coverage. Each ladder is `tts-bench qmax
--curve-check --refine` (a child process, Locust and all) against its own curve instance in
this process (`local_cloud.instances.serial_curve`: constant throughput RATE, a 1 ms first chunk),
whose true Q_max at the SLO follows from the Erlang wait (`local_cloud.instances.curve_truth`).
"Held": the Q_max interval's conservative end (none: 0) ≤ truth < its first failed level
(none: open above); the conservative end should also never exceed the truth by more than a
rung step (1 user after refinement).

    PYTHONPATH=.:container python benchmarks/qmax_coverage_live.py [--ladders 20] [--jobs 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.local_cloud.instances.curve_truth import judge_interval, true_p95_ms, true_q_max
from tts_bench.local_cloud.instances.serial_curve import serial_curve

FIRST_CHUNK_MS = 1.0


def ladder_command(url: str, out: Path, args: argparse.Namespace) -> list[str]:
    return [
        sys.executable, "-m", "tts_bench", "qmax", "--host", url, "--curve-check",
        "--rungs", args.rungs, "--hold-s", f"{args.hold_s:g}", "--measure-s", f"{args.measure_s:g}",
        "--idle-s", "1", "--max-hold-s", f"{args.max_hold_s:g}", "--slo-ms", f"{args.slo_ms:g}",
        "--refine", "--out", str(out),
    ]  # fmt: skip


def one_ladder(index: int, args: argparse.Namespace, root: Path) -> QmaxArtifact:
    out = root / f"ladder-{index:02d}"
    with serial_curve(args.rate, FIRST_CHUNK_MS, args.seed + index) as url:
        done = subprocess.run(
            ladder_command(url, out, args), capture_output=True, text=True, timeout=900
        )
    if done.returncode != 0:
        raise SystemExit(f"ladder {index}: exit {done.returncode}: {done.stderr[-2000:]}")
    (path,) = out.glob("qmax-*.json")
    return load_artifact(path, QmaxArtifact)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladders", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2, help="ladders at once, each its instance")
    parser.add_argument("--rate", type=float, default=25.0, help="the instance's requests/s")
    parser.add_argument("--slo-ms", type=float, default=340.0)
    parser.add_argument("--rungs", default="2,4,6")
    parser.add_argument("--hold-s", type=float, default=8.0)
    parser.add_argument("--measure-s", type=float, default=7.0)
    parser.add_argument("--max-hold-s", type=float, default=16.0)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--keep", type=Path, help="keep the artifacts here")
    args = parser.parse_args()

    truth = true_q_max(args.rate, args.slo_ms, FIRST_CHUNK_MS)
    near = ", ".join(
        f"c={n}: {true_p95_ms(n, args.rate):.1f}" for n in range(max(1, truth - 1), truth + 3)
    )
    print(f"truth: {args.rate:g} requests/s, SLO {args.slo_ms:g} ms: true Q_max {truth}")
    print(f"  p95 of the wait (ms; the TTFAB's is at most {FIRST_CHUNK_MS:g} ms more): {near}")
    root = args.keep or Path(tempfile.mkdtemp(prefix="qmax-coverage-"))
    began = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        ladders = list(pool.map(lambda i: one_ladder(i, args, root), range(args.ladders)))
    held = within = known = 0
    print("ladder  q_max  interval            undecided  held")
    for i, artifact in enumerate(ladders):
        interval = artifact.q_max_interval
        assert interval is not None
        judged = judge_interval(interval, truth, step=1)
        held += judged.held
        within += judged.conservative_within_step
        known += judged.known
        failing = "open" if interval.failing_above is None else f"fails {interval.failing_above}"
        print(
            f"{i + 1:>6}  {artifact.refined_q_max!s:>5}  [{interval.low}, {interval.high}] "
            f"{failing:<9}  {','.join(map(str, interval.undecided)) or '-':<9}  {judged.held}"
        )
    n = len(ladders)
    print(
        f"coverage: interval held the true Q_max in {held} of {n} ({held / n:.0%}); conservative "
        f"end ≤ truth + 1 in {within} of {n}; conservative end known in {known} of {n}; "
        f"{time.monotonic() - began:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
