"""Serving-path benchmark: can the server's CPU side carry the GPU engine's peak?

At the fused engine's offline limit (about 240-260 segments/s on the H200, 3.4 s of audio
per corpus segment) the server must write about 40,000-45,000 chunk events of 20 ms per
second. This measures, side by side, what each CPU stage carries, against that need:

1. G2P: pieces per second of the live G2P on one thread (when the text front end is here).
2. Per-segment encoding (`generation._segment_events`: resample, encode, base64, events),
   on one thread, for 24 kHz pcm_s16le and 8 kHz pcm_mulaw.
3. Resampling to 8 kHz: the container's `soxr` against the hand-written polyphase filter it
   replaced (speed on one thread, passband error below 3.4 kHz, alias level above 4 kHz).
4. One server's event loop end to end: the real aiohttp app (`tts_server.app.create_app`)
   with a stand-in engine that yields each segment's audio at once, driven by client
   processes (so the clients' parsing does not share the server's loop), counting the chunk
   events that arrive per second at each concurrency.

Usage (from the repository root):
    PYTHONPATH=.:container python benchmarks/serving_path_bench.py [--seconds 8] \
        [--concurrency 16,64,256] [--clients 4] [--segment-s 3.41] [--need 260]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHUNK_S = 0.02


def log(message: str) -> None:
    print(f"serving-path: {message}", file=sys.stderr, flush=True)


def stand_in_engine(segment_s: float, segments: int):  # type: ignore[no-untyped-def]
    """An `Engine` that answers every request at once with `segments` segments of speech-like
    audio `segment_s` long: the serving path alone, no model."""
    from tts_server.engine.base import (
        SAMPLE_RATE,
        Engine,
        InputProblem,
        Segment,
        SynthesisRequest,
    )

    rng = np.random.default_rng(0)
    samples = int(segment_s * SAMPLE_RATE)
    t = np.arange(samples) / SAMPLE_RATE
    audio = (0.3 * np.sin(2 * np.pi * 180 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(
        np.float32
    ) + rng.normal(0, 0.01, samples).astype(np.float32)

    class StandIn(Engine):
        languages = frozenset({"en"})  # type: ignore[assignment]
        voices = frozenset({"jf_alpha"})  # type: ignore[assignment]
        performance_env = {"ENGINE_BACKEND": "stand-in"}  # type: ignore[assignment]  # noqa: RUF012
        weights_sha256 = "0" * 64  # type: ignore[assignment]

        async def load(self) -> None: ...

        async def warmup(self) -> None: ...

        async def close(self) -> None: ...

        def check(self, request: SynthesisRequest) -> list[InputProblem]:
            return []

        async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[Segment]:
            for index in range(segments):
                yield Segment(index, request.text, "a", audio, index * segment_s)

    return StandIn()


def body(context_id: str, encoding: str, rate: int) -> dict:
    return {
        "context_id": context_id,
        "transcript": "Hello there.",
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": encoding, "sample_rate": rate},
    }


def g2p_rate(seconds: float) -> float | None:
    """Live G2P pieces per second on one thread, or None where the front end is missing."""
    try:
        from tts_server.engine.g2p import g2p_tokens
    except ImportError:
        return None
    texts = [
        "Thank you for calling, how can I help you today?",
        "Your order has shipped and should arrive on Tuesday.",
        "Please hold while I transfer you to the billing department.",
    ]
    try:
        g2p_tokens("en", "Load the G2P first.")
    except Exception:
        return None
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        g2p_tokens("en", texts[count % len(texts)] + f" {count}")  # defeat any memo
        count += 1
    return count / (time.perf_counter() - started)


def encoding_rate(
    segment_s: float, encoding: str, rate: int, seconds: float
) -> tuple[float, float]:
    """(segments/s, events/s) of `_segment_events` on one thread."""
    from tts_server.generation import _segment_events
    from tts_server.protocol import TtsRequest

    engine = stand_in_engine(segment_s, 1)
    request = TtsRequest.model_validate(body("bench", encoding, rate))

    async def one() -> object:
        return await anext(engine.synthesize(request.synthesis_request()))

    segment = asyncio.run(one())  # type: ignore[arg-type]
    segments, events, started = 0, 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        events += len(_segment_events(segment, request, 0.0, 24_000))  # type: ignore[arg-type]
        segments += 1
    elapsed = time.perf_counter() - started
    return segments / elapsed, events / elapsed


def polyphase_resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """The hand-written resampler the container used up to run 5 (a Hann-windowed sinc, 16
    zero crossings at the lower Nyquist, one filter per output phase), kept here as the
    baseline that `soxr` is compared with."""
    import math

    g = math.gcd(src_rate, dst_rate)
    up, down = dst_rate // g, src_rate // g
    cutoff = min(1.0, dst_rate / src_rate)
    half = math.ceil(16 / cutoff)
    offsets = np.arange(-half + 1, half + 1)
    frac = (np.arange(up) * down % up) / up
    dist = frac[:, None] - offsets[None, :]
    window = 0.5 + 0.5 * np.cos(np.pi * np.clip(dist / half, -1.0, 1.0))
    weights = cutoff * np.sinc(cutoff * dist) * window
    n_out = round(audio.size * dst_rate / src_rate)
    padded = np.concatenate(
        [np.zeros(half, np.float32), audio, np.zeros(half + 1, np.float32)]
    ).astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(padded[1:], 2 * half)
    out = np.empty(n_out, dtype=np.float32)
    for phase in range(min(up, n_out)):
        count = len(range(phase, n_out, up))
        first = phase * down // up
        out[phase::up] = windows[first : first + count * down : down] @ weights[phase]
    return out


def _tone_gain_db(resample, src: int, dst: int, freq: float) -> float:  # type: ignore[no-untyped-def]
    """Output over input level of a 1 s tone at `freq`, in dB, the edges (filter start-up)
    left out: the gain itself below the output's Nyquist, the alias level above it."""
    t = np.arange(src) / src
    out = np.asarray(resample(np.sin(2 * np.pi * freq * t).astype(np.float32), src, dst))
    core = out[dst // 10 : -dst // 10].astype(np.float64)
    if freq < dst / 2:  # the tone's own amplitude, fitted at its frequency
        n = np.arange(dst // 10, dst // 10 + core.size) / dst
        basis = np.stack([np.sin(2 * np.pi * freq * n), np.cos(2 * np.pi * freq * n)], axis=1)
        amplitude = float(np.hypot(*np.linalg.lstsq(basis, core, rcond=None)[0]))
    else:  # everything left is alias
        amplitude = float(np.sqrt(2) * np.sqrt(np.mean(core**2)))
    return 20 * np.log10(max(amplitude, 1e-12))


def resampler_comparison(segment_s: float, seconds: float, dst: int = 8000) -> dict[str, dict]:
    """Each resampler at 24 kHz -> `dst`: segments/s on one thread, the largest passband
    error below 3.4 kHz, the loudest alias of a tone above `dst`/2 (up to 12 kHz)."""
    import soxr

    candidates = {
        "polyphase (run 5)": polyphase_resample,
        "soxr HQ": lambda a, s, d: soxr.resample(a, s, d, quality="HQ"),
        "soxr VHQ": lambda a, s, d: soxr.resample(a, s, d, quality="VHQ"),
    }
    rng = np.random.default_rng(1)
    audio = rng.normal(0, 0.1, int(segment_s * 24_000)).astype(np.float32)
    passband = np.arange(100, 3401, 100)
    stopband = np.concatenate(
        [np.arange(dst / 2 + 50, dst / 2 + 1000, 50), np.arange(5000, 12001, 500)]
    )
    results: dict[str, dict] = {}
    for name, resample in candidates.items():
        resample(audio, 24_000, dst)  # filter set-up is not per-segment cost
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            resample(audio, 24_000, dst)
            count += 1
        rate = count / (time.perf_counter() - started)
        errors = [abs(_tone_gain_db(resample, 24_000, dst, f)) for f in passband]
        aliases = [_tone_gain_db(resample, 24_000, dst, f) for f in stopband]
        worst = int(np.argmax(aliases))
        results[name] = {
            "segments_per_s": round(rate, 1),
            "passband_error_db_max": round(max(errors), 4),
            "alias_db_max": round(aliases[worst], 1),
            "alias_worst_hz": float(stopband[worst]),
            "alias_db_above_5khz": round(
                max(a for a, f in zip(aliases, stopband, strict=True) if f >= 5000), 1
            ),
        }
        log(f"resample {name}: {results[name]}")
    return results


def _client(url: str, concurrency: int, seconds: float, encoding: str, rate: int, queue) -> None:  # type: ignore[no-untyped-def]
    import aiohttp

    async def stream(session: aiohttp.ClientSession, deadline: float, counts: list[int]) -> None:
        i = 0
        while time.monotonic() < deadline:
            async with session.post(url, json=body(f"c{os.getpid()}-{i}", encoding, rate)) as r:
                async for line in r.content:
                    if line.startswith(b'{"type":"chunk"'):
                        counts[0] += 1
            counts[1] += 1
            i += 1

    async def run() -> tuple[int, int]:
        counts = [0, 0]
        deadline = time.monotonic() + seconds
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            await asyncio.gather(*(stream(session, deadline, counts) for _ in range(concurrency)))
        return counts[0], counts[1]

    queue.put(asyncio.run(run()))


async def loop_rate(
    segment_s: float, segments: int, concurrencies: list[int], clients: int, seconds: float,
    encoding: str, rate: int,
) -> dict[int, tuple[float, float, float, float]]:  # fmt: skip
    """(chunk events/s, requests/s, loop-thread CPU µs per event, process CPU µs per event)
    that one server loop delivered, by concurrency."""
    from aiohttp import web
    from tts_server.app import create_app
    from tts_server.app_state import STATE, Phase
    from tts_server.logs import ServerLog
    from tts_server.settings import ServerSettings

    engine = stand_in_engine(segment_s, segments)
    settings = ServerSettings(host="127.0.0.1", port=0)
    server_log = ServerLog()
    server_log.marker("container_started")
    app = create_app(settings, log=server_log, engine_factory=lambda _s: engine)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    while app[STATE].phase is not Phase.READY:
        await asyncio.sleep(0.05)
    url = f"http://127.0.0.1:{port}/invocations"
    results: dict[int, tuple[float, float, float, float]] = {}
    context = multiprocessing.get_context("spawn")
    for concurrency in concurrencies:
        queue = context.Queue()
        share = [
            concurrency // clients + (1 if k < concurrency % clients else 0) for k in range(clients)
        ]
        procs = [
            context.Process(target=_client, args=(url, n, seconds, encoding, rate, queue))
            for n in share if n
        ]  # fmt: skip
        for proc in procs:
            proc.start()
        started = time.monotonic()
        loop_cpu, process_cpu = time.thread_time(), time.process_time()
        while any(p.is_alive() for p in procs):
            await asyncio.sleep(0.1)  # the server keeps serving on this loop meanwhile
        loop_cpu, process_cpu = time.thread_time() - loop_cpu, time.process_time() - process_cpu
        elapsed = time.monotonic() - started
        got = [queue.get() for _ in procs]
        events, requests = sum(g[0] for g in got), sum(g[1] for g in got)
        # CPU per event: what the loop (this thread) and the whole server process spent,
        # client start-up included as idle time; steadier than events/s on a shared machine.
        per_event = (1e6 * loop_cpu / max(events, 1), 1e6 * process_cpu / max(events, 1))
        results[concurrency] = (events / seconds, requests / seconds, *per_event)
        log(f"c={concurrency}: {events / seconds:,.0f} chunk events/s, {requests / seconds:.1f} "
            f"requests/s, loop {per_event[0]:.1f} us/event, process {per_event[1]:.1f} us/event "
            f"({elapsed:.1f} s incl. client start)")  # fmt: skip
    await runner.cleanup()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", default="16,64,256")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--segment-s", type=float, default=3.41, help="audio per segment")
    parser.add_argument("--segments", type=int, default=1, help="segments per request")
    parser.add_argument("--need", type=float, default=260.0, help="engine peak, segments/s")
    parser.add_argument("--out", type=Path, default=None, help="JSON of the figures")
    parser.add_argument(
        "--event-loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the server loop's implementation (uvloop where installed)",
    )
    args = parser.parse_args()
    events_per_segment = args.segment_s / CHUNK_S
    need_events = args.need * events_per_segment
    g2p = g2p_rate(min(args.seconds, 3.0))
    enc24 = encoding_rate(args.segment_s, "pcm_s16le", 24_000, min(args.seconds, 3.0))
    enc8 = encoding_rate(args.segment_s, "pcm_mulaw", 8_000, min(args.seconds, 3.0))
    resamplers = resampler_comparison(args.segment_s, min(args.seconds, 3.0))
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    loop_factory = None
    if args.event_loop == "uvloop":
        import uvloop

        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        loop = runner.run(
            loop_rate(args.segment_s, args.segments, concurrencies, args.clients, args.seconds,
                      "pcm_s16le", 24_000)
        )  # fmt: skip
    best_events = max(v[0] for v in loop.values())
    rows = [
        ("G2P, one thread (pieces/s)", g2p, args.need),
        ("encode 24 kHz s16le, one thread (segments/s)", enc24[0], args.need),
        ("encode 8 kHz mulaw, one thread (segments/s)", enc8[0], args.need),
        ("one server loop, best (segments/s)", best_events / events_per_segment, args.need),
        ("one server loop, best (chunk events/s)", best_events, need_events),
    ]
    print(f"\nServing path on {os.cpu_count()} cores; need at the engine's peak: {args.need:g} "
          f"segments/s x {events_per_segment:.0f} events = {need_events:,.0f} chunk events/s\n")  # fmt: skip
    print("| stage | carries | need | ratio |\n|---|---|---|---|")
    for name, value, need in rows:
        shown = "not measured" if value is None else f"{value:,.1f}"
        ratio = "" if value is None else f"{value / need:.2f}"
        print(f"| {name} | {shown} | {need:,.0f} | {ratio} |")
    print("\n| concurrency | chunk events/s | requests/s | loop CPU us/event | process CPU us/event |"
          "\n|---|---|---|---|---|")  # fmt: skip
    for c, (events, requests, loop_us, process_us) in loop.items():
        print(f"| {c} | {events:,.0f} | {requests:.1f} | {loop_us:.1f} | {process_us:.1f} |")
    print("\n| 24 kHz -> 8 kHz | segments/s, one thread | passband error < 3.4 kHz | loudest alias "
          "(at) | loudest alias >= 5 kHz |\n|---|---|---|---|---|")  # fmt: skip
    for name, r in resamplers.items():
        print(f"| {name} | {r['segments_per_s']:,.1f} | {r['passband_error_db_max']:.3f} dB | "
              f"{r['alias_db_max']:.1f} dB ({r['alias_worst_hz']:.0f} Hz) | "
              f"{r['alias_db_above_5khz']:.1f} dB |")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps({
            "cores": os.cpu_count(), "need_segments_per_s": args.need,
            "events_per_segment": events_per_segment, "g2p_pieces_per_s": g2p,
            "encode_s16le_24k": enc24, "encode_mulaw_8k": enc8,
            "event_loop": args.event_loop, "resample_24k_to_8k": resamplers,
            "loop_by_concurrency": {str(k): v for k, v in loop.items()},
            "loop_columns": ["chunk_events_per_s", "requests_per_s", "loop_cpu_us_per_event",
                             "process_cpu_us_per_event"],
        }, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
