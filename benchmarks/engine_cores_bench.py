"""Two engines on one machine, as the test suite's two workers run them: `ENGINE_CORES` unset
(each engine's runs take every core) side by side with `ENGINE_CORES=1`.

Not a test: it prints figures. Each engine is a process of its own (onnx, serial mode) that
loads, synthesises one warm-up sentence, then waits; once both are ready they synthesise the
same sentences one after another at the same moment. Per setting it reports the wall time
until both are done and the CPU seconds both spent (user + system), and, for reference, one
engine alone. Ratios are `ENGINE_CORES=1` over unset: below 1 is less.

    PYTHONPATH=.:container .venv/bin/python benchmarks/engine_cores_bench.py [--sentences 9]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SENTENCES = (
    "The meeting starts at nine, please be on time.",
    "Thank you for calling, how can I help you today?",
    "Your order has shipped and will arrive on Tuesday.",
)

# One engine: load, warm up, say "ready", wait for a line, synthesise, print its figures.
CHILD = """
import asyncio, json, os, sys, time
from tts_server.engine import SynthesisRequest, create_engine
texts = json.loads(sys.argv[1])
async def main():
    engine = create_engine("onnx", "serial")
    await engine.load()
    async for _ in engine.synthesize(SynthesisRequest(texts[0], "en", "jm_kumo")):
        pass
    print("ready", flush=True)
    sys.stdin.readline()
    t0, c0 = time.perf_counter(), os.times()
    for text in texts:
        async for _ in engine.synthesize(SynthesisRequest(text, "en", "jm_kumo")):
            pass
    c1 = os.times()
    print(json.dumps({"wall_s": time.perf_counter() - t0,
                      "cpu_s": (c1.user - c0.user) + (c1.system - c0.system)}), flush=True)
    await engine.close()
asyncio.run(main())
"""


def run_engines(count: int, cores: str | None, texts: list[str]) -> tuple[float, float]:
    """(wall seconds until every engine is done, CPU seconds of all of them)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "container")])
    env.pop("ENGINE_CORES", None)
    if cores is not None:
        env["ENGINE_CORES"] = cores
    command = [sys.executable, "-c", CHILD, json.dumps(texts)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True, "env": env}
    children = [subprocess.Popen(command, **pipes) for _ in range(count)]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    figures = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]
    wall = time.perf_counter() - start
    return wall, sum(f["cpu_s"] for f in figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=9, help="per engine (default 9)")
    args = parser.parse_args()
    texts = [SENTENCES[i % len(SENTENCES)] for i in range(args.sentences)]
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, {len(texts)} sentences")
    print(f"{'engines':>8} {'ENGINE_CORES':>13} {'wall s':>8} {'CPU s':>8}")
    for count in (2, 1):
        rows = {}
        for cores in (None, "1"):
            rows[cores] = run_engines(count, cores, texts)
            wall, cpu = rows[cores]
            print(f"{count:>8} {cores or 'unset':>13} {wall:>8.2f} {cpu:>8.2f}")
        (w0, c0), (w1, c1) = rows[None], rows["1"]
        print(f"{count:>8} {'1 / unset':>13} {w1 / w0:>8.2f} {c1 / c0:>8.2f}")


if __name__ == "__main__":
    main()
