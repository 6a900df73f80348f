"""bidi-stream benchmark: the AWS SDK's HTTP/2 client through the local cloud, against the
container's WebSocket directly, side by side in one run.

Not a test: it prints figures. `tts-bench local-cloud --instances 1` (onnx) in a child process,
as a user runs it; the SDK (`.venv-http2`, CRT transport) reaches its HTTP/2 bridge through the
variables of `--env-file`, and the direct path is the instance's own WebSocket (its URL from
the cloud's log). Turns alternate direct / bridged on one long-lived session each, so drift in
a shared machine's load falls on both alike. TTFAB is timed where the bytes arrive on each
path: here for the direct WebSocket, in the SDK's worker for the bridged one. Also the local
cloud process's CPU per bridged turn (the bridge runs in it). Ratios are bridged / direct
(≤ 1.05 at p50 is the local cloud's budget).

    PYTHONPATH=.:container python -u benchmarks/bidi_bridge_bench.py [--turns 8] [--text "…"]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import websocket

from tts_bench.measure.transport.bidi_stream import BidiWorker

REPO = Path(__file__).resolve().parents[1]

WS_PATH = "/invocations-bidirectional-stream"


def request(context_id: str, text: str) -> dict[str, object]:
    return {
        "context_id": context_id,
        "transcript": text,
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }


def direct_turn(ws: websocket.WebSocket, body: dict[str, object]) -> float:
    """TTFAB in ms on the container's WebSocket; reads the turn to its end."""
    sent = time.perf_counter()
    ws.send(json.dumps(body))
    ttfab_ms = None
    while True:
        event = json.loads(ws.recv())
        if event["type"] == "chunk" and ttfab_ms is None:
            ttfab_ms = (time.perf_counter() - sent) * 1000
        if event.get("done"):
            if event["type"] != "done" or ttfab_ms is None:
                raise RuntimeError(f"direct turn failed: {event}")
            return ttfab_ms


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="turns per path")
    parser.add_argument("--text", default="Thank you for calling. How can I help you today?")
    args = parser.parse_args()

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")])}
    with tempfile.TemporaryDirectory() as tmp:
        env_file, log_path = Path(tmp) / "cloud.env", Path(tmp) / "cloud.log"
        with open(log_path, "w") as log:
            cloud = subprocess.Popen(
                [
                    sys.executable, "-m", "tts_bench", "local-cloud", "--instances", "1",
                    "--env-file", str(env_file), "--server-args", "--backend onnx",
                ],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        try:
            while not env_file.exists():
                if cloud.poll() is not None:
                    raise SystemExit(log_path.read_text()[-2000:])
                time.sleep(0.5)
            values = dict(line.split("=", 1) for line in env_file.read_text().split())
            said = log_path.read_text()
            instance = re.findall(r"InService at http://(127\.0\.0\.1:\d+)", said)[-1]
            endpoint = re.findall(r"endpoint (\S+) is InService", said)[-1]
            with BidiWorker({**env, **values}) as worker:
                session = worker.open(endpoint)
                session.wait_opened(60)
                ws = websocket.create_connection(f"ws://{instance}{WS_PATH}")
                direct_turn(ws, request("warm-direct", args.text))  # warm both paths
                session.turn(request("warm-bridged", args.text), 120)
                direct: list[float] = []
                bridged: list[float] = []
                cloud_cpu = 0.0
                for n in range(args.turns):
                    direct.append(direct_turn(ws, request(f"d{n}", args.text)))
                    before = cpu_s(cloud.pid)
                    result = session.turn(request(f"b{n}", args.text), 120)
                    cloud_cpu += cpu_s(cloud.pid) - before
                    if result.outcome != "ok" or result.ttfab_ms is None:
                        raise RuntimeError(f"bridged turn failed: {result}")
                    bridged.append(result.ttfab_ms)
                    print(f"turn {n + 1}: direct {direct[-1]:.0f} ms, bridged {bridged[-1]:.0f} ms")
                ws.close()
                session.close()
        finally:
            cloud.terminate()
            cloud.wait(timeout=90)

    rows = [("p50", 0.50), ("p95", 0.95)]
    print(f"TTFAB over {args.turns} turns per path, alternating, text {args.text!r}")
    print(f"{'':6}{'direct ms':>12}{'bridged ms':>12}{'ratio':>8}")
    for name, q in rows:
        d, b = quantile(direct, q), quantile(bridged, q)
        print(f"{name:6}{d:12.1f}{b:12.1f}{b / d:8.3f}")
    print(f"local cloud process CPU per bridged turn: {cloud_cpu / args.turns * 1000:.1f} ms")


if __name__ == "__main__":
    main()
