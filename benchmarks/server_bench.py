"""Server benchmark: refusal latency at saturation and the server's overhead over the bare engine.

One run starts a local server (`python -m tts_server`, real offline weights) with
MAX_QUEUE_DEPTH=k and measures, side by side as ratios:

1. Refusal latency at saturation: with k long streams holding every slot, n requests in a row
   each get 503 queue_saturated; their latency (send to full response) against the latency of
   GET /ping on the same server at the same time (the cheapest thing it answers).
2. Overhead at concurrency 1: the same sentences, one at a time, through the server (time to
   the first chunk event, time to the done event) against the bare engine in this process
   (time to the first segment, time to the last). Requests alternate between the two, so
   both see the same machine load.

Usage (from the repository root):
    PYTHONPATH=.:container python benchmarks/server_bench.py [--depth 2] [--refusals N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
SENTENCES = (
    "Hello there.",
    "Thank you for calling, how can I help you today?",
    "Your order has shipped and should arrive on Tuesday.",
    "Please hold while I transfer you to the billing department.",
)
HOLDING_TEXT = " ".join(f"This is sentence {i}." for i in range(1, 150))  # < 4000 chars


def request_body(context_id: str, text: str) -> dict:
    return {
        "context_id": context_id,
        "transcript": text,
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _drain(proc: subprocess.Popen[str]) -> None:
    for _ in proc.stdout or ():
        pass


def start_server(depth: int) -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")]),
        "MAX_QUEUE_DEPTH": str(depth),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tts_server", "--port", "0"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    port = None
    for line in proc.stdout or ():
        record = json.loads(line)
        if record.get("msg") == "listening":
            port = record["port"]
        if record.get("marker") == "ready":
            break
    if port is None or proc.poll() is not None:
        raise SystemExit("the server did not come up; run `python -m tts_server` to see why")
    # Keep draining stdout so the server never blocks on a full pipe.
    threading.Thread(target=_drain, args=(proc,), daemon=True).start()
    return proc, f"http://127.0.0.1:{port}"


async def timed_get(session: aiohttp.ClientSession, url: str) -> float:
    start = time.perf_counter()
    async with session.get(url) as resp:
        await resp.read()
    return time.perf_counter() - start


async def timed_refusal(session: aiohttp.ClientSession, base: str, i: int) -> float:
    start = time.perf_counter()
    async with session.post(f"{base}/invocations", json=request_body(f"r{i}", "Hi.")) as resp:
        body = await resp.json()
    elapsed = time.perf_counter() - start
    if resp.status != 503 or body.get("error") != "queue_saturated":
        raise SystemExit(f"expected a 503 queue_saturated, got {resp.status} {body}")
    return elapsed


async def refusal_latency(base: str, depth: int, n: int) -> tuple[list[float], list[float]]:
    async with aiohttp.ClientSession() as holder, aiohttp.ClientSession() as session:
        holds = []
        for i in range(depth):
            resp = await holder.post(
                f"{base}/invocations", json=request_body(f"hold{i}", HOLDING_TEXT)
            )
            if resp.status != 200:
                raise SystemExit(f"could not hold a slot: {resp.status} {await resp.text()}")
            await resp.content.readline()  # streaming: the slot is held
            holds.append(resp)
        refusals, pings = [], []
        for i in range(n):
            refusals.append(await timed_refusal(session, base, i))
            pings.append(await timed_get(session, f"{base}/ping"))
        for resp in holds:
            resp.close()
    return refusals, pings


async def through_server(
    session: aiohttp.ClientSession, base: str, text: str, i: int
) -> tuple[float, float]:
    start = time.perf_counter()
    first = None
    async with session.post(f"{base}/invocations", json=request_body(f"o{i}", text)) as resp:
        async for line in resp.content:
            event = json.loads(line)
            if first is None and event["type"] == "chunk":
                first = time.perf_counter() - start
            if event["done"]:
                break
    return first or float("nan"), time.perf_counter() - start


async def bare_engine(engine: object, text: str) -> tuple[float, float]:
    from tts_server.engine import SynthesisRequest

    start = time.perf_counter()
    first = None
    async for _ in engine.synthesize(SynthesisRequest(text, "en", "jf_alpha")):  # type: ignore[attr-defined]
        if first is None:
            first = time.perf_counter() - start
    return first or float("nan"), time.perf_counter() - start


async def overhead(base: str, rounds: int) -> dict[str, list[float]]:
    from tts_server.engine import create_engine

    engine = create_engine()
    await engine.load()
    await engine.warmup()
    samples: dict[str, list[float]] = {
        "server_first": [],
        "server_total": [],
        "bare_first": [],
        "bare_total": [],
    }
    async with aiohttp.ClientSession() as session:
        await through_server(session, base, "Warm up.", -1)
        for r in range(rounds):
            for i, text in enumerate(SENTENCES):
                first, total = await through_server(session, base, text, r * 100 + i)
                samples["server_first"].append(first)
                samples["server_total"].append(total)
                first, total = await bare_engine(engine, text)
                samples["bare_first"].append(first)
                samples["bare_total"].append(total)
                print(
                    f"  round {r + 1}/{rounds} sentence {i + 1}/{len(SENTENCES)}", file=sys.stderr
                )
    await engine.close()
    return samples


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=2, help="MAX_QUEUE_DEPTH of the server (2)")
    parser.add_argument("--refusals", type=int, default=200, help="refused requests to time (200)")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the sentences (3)")
    args = parser.parse_args(argv)

    print("starting the server (real weights) ...", file=sys.stderr)
    proc, base = start_server(args.depth)
    try:
        print(f"timing {args.refusals} refusals at saturation ...", file=sys.stderr)
        refusals, pings = await refusal_latency(base, args.depth, args.refusals)
        await asyncio.sleep(1.0)  # the held streams' slots free
        print("timing server vs bare engine at concurrency 1 ...", file=sys.stderr)
        s = await overhead(base, args.rounds)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=35)

    print(
        f"\nServer benchmark ({len(refusals)} refusals at MAX_QUEUE_DEPTH={args.depth}; "
        f"{len(s['server_total'])} requests at concurrency 1, 24 kHz pcm_s16le, voice jf_alpha)\n"
    )
    print("| measure | server (ms) | baseline (ms) | ratio | baseline is |")
    print("|---|---|---|---|---|")
    for q in (50, 99):
        r, p = percentile(refusals, q), percentile(pings, q)
        print(
            f"| refusal latency p{q} | {ms(r)} | {ms(p)} | {r / p:.2f} | GET /ping, same server |"
        )
    for key, label in (("first", "time to first audio"), ("total", "time to last audio")):
        for q in (50, 99):
            a, b = percentile(s[f"server_{key}"], q), percentile(s[f"bare_{key}"], q)
            print(f"| {label} p{q} | {ms(a)} | {ms(b)} | {a / b:.3f} | bare engine, in process |")
    extra = [a - b for a, b in zip(s["server_total"], s["bare_total"], strict=True)]
    paired = [a / b for a, b in zip(s["server_total"], s["bare_total"], strict=True)]
    print(
        f"\nPaired (each sentence through the server, then bare): median extra time to last audio "
        f"{ms(statistics.median(extra))} ms, median ratio {statistics.median(paired):.3f}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
