"""bidi-stream benchmark: the AWS SDK's HTTP/2 client through the bridge, against the container's
WebSocket directly, side by side in one run.

Not a test: it prints figures. One `python -m tts_server --backend onnx`, one `BidiBridge` on
loopback (TLS, HTTP/2) whose sessions go to that server, one SDK worker (`.venv-http2`). Turns
alternate between the two paths (direct, bridged, direct, …) on one long-lived session each,
so drift in a shared machine's load falls on both alike. TTFAB is timed where the bytes
arrive on each path: here for the direct WebSocket, in the worker for the SDK. Also the
bridge's own CPU per bridged turn: its thread's time on CPU (Linux schedstat), which carries
all of its HTTP/2, event-stream and WebSocket work. Ratios are bridged / direct (< 1.05 at p50
is the local cloud's budget, issue 13).

    PYTHONPATH=.:container python benchmarks/bidi_bridge_bench.py [--turns 20] [--text "…"]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import websocket

from tts_bench.local_cloud.bidi_bridge import BidiBridge
from tts_bench.local_cloud.tls import make_local_tls
from tts_bench.measure.bidi_stream import BidiWorker
from tts_bench.measure.local_server import LocalServer

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


def bridge_cpu_s() -> float:
    """CPU seconds of the bridge's thread so far (its asyncio loop does all of its work)."""
    (thread,) = [t for t in threading.enumerate() if t.name == "bidi-bridge"]
    stat = Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text()
    return int(stat.split()[0]) / 1e9


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="turns per path")
    parser.add_argument("--text", default="Thank you for calling. How can I help you today?")
    args = parser.parse_args()

    @contextlib.contextmanager
    def open_session(_endpoint: str) -> Iterator[str]:
        yield f"ws://127.0.0.1:{server.port}{WS_PATH}"

    with LocalServer(["--backend", "onnx"]) as server, tempfile.TemporaryDirectory() as tmp:
        server.wait_ready()
        tls = make_local_tls(Path(tmp))
        with BidiBridge(tls, open_session) as bridge:
            env = {
                **os.environ,
                **bridge.client_env(),
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
            }
            with BidiWorker(env) as worker:
                session = worker.open("bench")
                session.wait_opened(60)
                ws = websocket.create_connection(f"ws://127.0.0.1:{server.port}{WS_PATH}")
                direct_turn(ws, request("warm-direct", args.text))  # warm both paths
                session.turn(request("warm-bridged", args.text), 120)
                direct: list[float] = []
                bridged: list[float] = []
                cpu_bridge = 0.0
                for n in range(args.turns):
                    direct.append(direct_turn(ws, request(f"d{n}", args.text)))
                    cpu = bridge_cpu_s()
                    result = session.turn(request(f"b{n}", args.text), 120)
                    cpu_bridge += bridge_cpu_s() - cpu
                    if result.outcome != "ok" or result.ttfab_ms is None:
                        raise RuntimeError(f"bridged turn failed: {result}")
                    bridged.append(result.ttfab_ms)
                    print(f"turn {n + 1}: direct {direct[-1]:.0f} ms, bridged {bridged[-1]:.0f} ms")
                ws.close()
                session.close()

    rows = [("p50", 0.50), ("p95", 0.95)]
    print(f"TTFAB over {args.turns} turns per path, alternating, text {args.text!r}")
    print(f"{'':6}{'direct ms':>12}{'bridged ms':>12}{'ratio':>8}")
    for name, q in rows:
        d, b = quantile(direct, q), quantile(bridged, q)
        print(f"{name:6}{d:12.1f}{b:12.1f}{b / d:8.3f}")
    print(f"bridge thread CPU per bridged turn: {cpu_bridge / args.turns * 1000:.2f} ms")


if __name__ == "__main__":
    main()
