"""Server start benchmark: spawn → first `/ping` answer and spawn → `/ping` 200, two code trees.

Not a test: it prints figures. Each start is a fresh `python -m tts_server --backend onnx` on a
free loopback port, polled on `/ping` every 10 ms from the moment it is spawned:
- `ping` is the first answer of any status (the engine-less 503 while the weights load);
- `ready` is the first 200 (weights loaded, both G2Ps loaded, one warm-up synthesis done).
The server's own start-up markers split `ready` into stages (the G2P load is inside
`weights_ready → warmup_done`). Starts alternate between the two trees (A B A B …), after one
discarded start of each (the weights cache, the page cache), so a change in the machine's load
hits both alike. The figures are medians; `new − baseline` is what the change saves.

The baseline tree is another checkout of the repository, e.g. main:

    git worktree add /tmp/main-tree main     # or: git archive main | tar -x -C DIR
    PYTHONPATH=.:container .venv/bin/python benchmarks/server_start_bench.py \\
        --baseline /tmp/main-tree [--runs 5]

Both trees run with this interpreter (this checkout's .venv): only their code differs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLL_S = 0.01
START_TIMEOUT_S = 300.0
STAGES = ("container_started", "weights_ready", "warmup_done", "ready")


@dataclass
class Start:
    """One start: seconds from spawn to the first /ping answer, to /ping 200, and each marker."""

    ping_s: float
    ready_s: float
    markers_s: dict[str, float] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def read_markers(stdout: object, spawned_wall: float, markers: dict[str, float]) -> None:
    for line in stdout:  # type: ignore[attr-defined]
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("msg") == "startup_marker" and "ts" in record:
            markers[record["marker"]] = float(record["ts"]) - spawned_wall


def one_start(tree: Path) -> Start:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k != "MAX_QUEUE_DEPTH"},
        "PYTHONPATH": os.pathsep.join([str(tree / "container"), str(tree)]),
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, "-m", "tts_server", "--backend", "onnx", "--port", str(port)]
    url = f"http://127.0.0.1:{port}/ping"
    spawned_wall = time.time()
    spawned = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    markers: dict[str, float] = {}
    reader = threading.Thread(
        target=read_markers, args=(child.stdout, spawned_wall, markers), daemon=True
    )
    reader.start()
    ping_s: float | None = None
    try:
        while True:
            status = ping_status(url)
            now = time.perf_counter() - spawned
            if status is not None and ping_s is None:
                ping_s = now
            if status == 200:
                return Start(ping_s or now, now, markers)
            if child.poll() is not None or now > START_TIMEOUT_S:
                raise SystemExit(f"{tree}: the server exited or never became ready ({now:.0f} s)")
            time.sleep(POLL_S)
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=40)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        reader.join(timeout=5)


def stage_medians(starts: list[Start]) -> dict[str, float]:
    """Median seconds of each stage between consecutive markers (where every start has both)."""
    out = {}
    for a, b in itertools.pairwise(STAGES):
        spans = [s.markers_s[b] - s.markers_s[a] for s in starts if {a, b} <= s.markers_s.keys()]
        if len(spans) == len(starts):
            out[f"{a} → {b}"] = statistics.median(spans)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--runs", type=int, default=5, help="measured starts per tree")
    args = parser.parse_args()
    trees = {"baseline": args.baseline.resolve(), "new": REPO}
    for tree in trees.values():
        if not (tree / "container" / "tts_server" / "__main__.py").is_file():
            parser.error(f"--baseline {tree}: no container/tts_server in it")
    load_before = os.getloadavg()
    began = time.strftime("%Y-%m-%d %H:%M:%S")
    for name, tree in trees.items():
        warm = one_start(tree)
        print(f"discarded first start of {name}: ready after {warm.ready_s:.2f} s", flush=True)
    starts: dict[str, list[Start]] = {name: [] for name in trees}
    for run in range(args.runs):
        for name, tree in trees.items():
            start = one_start(tree)
            starts[name].append(start)
            print(
                f"run {run + 1}/{args.runs} {name:8s} ping {start.ping_s:5.2f} s  "
                f"ready {start.ready_s:6.2f} s",
                flush=True,
            )
    load_after = os.getloadavg()
    print(f"\n{began} → {time.strftime('%H:%M:%S')}, {os.cpu_count()} CPUs")
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}")
    print(f"baseline {trees['baseline']}; new {trees['new']}; {args.runs} starts each\n")
    print("| median s | baseline | new | new − baseline | new / baseline |")
    print("|---|---|---|---|---|")
    rows = {
        "spawn → first /ping answer": {n: [s.ping_s for s in v] for n, v in starts.items()},
        "spawn → /ping 200": {n: [s.ready_s for s in v] for n, v in starts.items()},
    }
    for name, per_tree in rows.items():
        base, new = (statistics.median(per_tree[t]) for t in ("baseline", "new"))
        print(f"| {name} | {base:.2f} | {new:.2f} | {new - base:+.2f} | {new / base:.2f} |")
    stages = {name: stage_medians(v) for name, v in starts.items()}
    for stage in [s for s in stages["baseline"] if s in stages["new"]]:
        base, new = stages["baseline"][stage], stages["new"][stage]
        print(f"| {stage} | {base:.2f} | {new:.2f} | {new - base:+.2f} | {new / base:.2f} |")
    for name, per_tree in rows.items():
        for tree_name, values in per_tree.items():
            print(f"{name}, {tree_name}: " + " ".join(f"{v:.2f}" for v in values))


if __name__ == "__main__":
    main()
