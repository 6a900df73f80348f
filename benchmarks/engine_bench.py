"""Engine benchmark: concurrent mode side by side with serial mode, on this machine.

Not a test: it prints figures. For each mode, with one engine loaded and warmed up:
- concurrency 1: time to first segment (TTFS) and real-time factor (synthesis time / audio
  time) per request;
- concurrency 2 and 4: throughput (requests/s and audio seconds per second) and mean TTFS,
  with c requests in flight at all times (closed loop, each client sends its next request
  when the last one ends).
Ratios are concurrent / serial (throughput: > 1 is better; TTFS and RTF: < 1 is better).

    PYTHONPATH=.:container python benchmarks/engine_bench.py [--backend onnx|torch]
        [--model-dir DIR] [--device cpu|cuda] [--requests-per-client 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass

from tts_server.engine import SAMPLE_RATE, Engine, SynthesisRequest, create_engine

# Call-centre sentences, two or three to a request, so streaming has something to stream.
CORPUS = (
    "Thank you for calling. How can I help you today?",
    "Your order has shipped. It should arrive on Monday.",
    "Please hold for a moment. I am transferring your call.",
    "I can reset your password now. You will get an email shortly.",
    "The store opens at nine. We close at six on weekdays.",
    "Your balance is forty two dollars. Would you like to pay it now?",
)


@dataclass(frozen=True)
class Sample:
    ttfs_s: float
    total_s: float
    audio_s: float


async def one_request(engine: Engine, text: str, voice: str) -> Sample:
    started = time.perf_counter()
    first = None
    samples = 0
    async for segment in engine.synthesize(SynthesisRequest(text, "en", voice)):
        first = first if first is not None else time.perf_counter() - started
        samples += len(segment.audio)
    return Sample(first or 0.0, time.perf_counter() - started, samples / SAMPLE_RATE)


async def closed_loop(
    engine: Engine, clients: int, per_client: int, voice: str
) -> tuple[list[Sample], float]:
    async def client(index: int) -> list[Sample]:
        return [
            await one_request(engine, CORPUS[(index * per_client + k) % len(CORPUS)], voice)
            for k in range(per_client)
        ]

    started = time.perf_counter()
    results = await asyncio.gather(*(client(i) for i in range(clients)))
    return [s for r in results for s in r], time.perf_counter() - started


async def measure(args: argparse.Namespace, mode: str) -> dict[str, float]:
    engine = create_engine(args.backend, mode, model_dir=args.model_dir, device=args.device)
    await engine.load()
    await engine.warmup()
    voice = args.voice
    figures: dict[str, float] = {}
    try:
        print(f"[{mode}] concurrency 1…", file=sys.stderr)
        solo, _ = await closed_loop(engine, 1, len(CORPUS) // 2, voice)
        figures["c1 TTFS mean (ms)"] = 1000 * statistics.mean(s.ttfs_s for s in solo)
        figures["c1 RTF mean"] = statistics.mean(s.total_s / s.audio_s for s in solo)
        figures["c1 request latency mean (ms)"] = 1000 * statistics.mean(s.total_s for s in solo)
        for clients in (2, 4):
            print(f"[{mode}] concurrency {clients}…", file=sys.stderr)
            samples, wall = await closed_loop(engine, clients, args.requests_per_client, voice)
            figures[f"c{clients} throughput (req/s)"] = len(samples) / wall
            figures[f"c{clients} audio-s per s"] = sum(s.audio_s for s in samples) / wall
            figures[f"c{clients} TTFS mean (ms)"] = 1000 * statistics.mean(
                s.ttfs_s for s in samples
            )
    finally:
        await engine.close()
    print(f"[{mode}] {engine.performance_env}", file=sys.stderr)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("onnx", "torch"), default="onnx")
    parser.add_argument("--model-dir")
    parser.add_argument("--device")
    parser.add_argument("--voice", default="jf_alpha")
    parser.add_argument("--requests-per-client", type=int, default=2)
    args = parser.parse_args()
    results = {mode: asyncio.run(measure(args, mode)) for mode in ("concurrent", "serial")}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"backend {args.backend}, {cores} cores ({platform.processor() or platform.machine()}), "
          f"voice {args.voice}, {len(CORPUS)} two-sentence English requests")  # fmt: skip
    print()
    print("| metric | concurrent | serial | concurrent / serial |")
    print("|---|---:|---:|---:|")
    for key in results["concurrent"]:
        a, b = results["concurrent"][key], results["serial"][key]
        print(f"| {key} | {a:.3f} | {b:.3f} | {a / b:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
