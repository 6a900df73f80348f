"""`tts-bench synth`: speak one text into a WAV file with the local engine.

Prints the time to the first segment and the real-time factor (synthesis time / audio
time) so a backend or mode can be sized up by hand.
"""

from __future__ import annotations

import argparse
import sys
import time
import wave
from pathlib import Path

from tts_bench.cli.server_options import EngineCommandError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "synth",
        description="Synthesise TEXT with the local Kokoro engine (offline weights by default).",
    )
    parser.add_argument("text", help="what to say; may hold <speed ratio=R/> and <volume ratio=R/>")
    parser.add_argument("--language", default="en", help="G2P language: en or ja (default en)")
    parser.add_argument("--voice", default="jf_alpha", help="voice id (default jf_alpha)")
    parser.add_argument("--out", type=Path, required=True, help="WAV file to write")
    parser.add_argument("--backend", choices=("onnx", "torch"), default="onnx")
    parser.add_argument("--model-dir", type=Path, help="Hugging Face layout dir (torch backend)")
    parser.add_argument("--device", help="torch device, e.g. cpu or cuda (default: GPU if any)")
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--serial", action="store_true", help="serial engine mode")
    parser.set_defaults(handler=run)


async def _synthesize(args: argparse.Namespace) -> tuple[list, float, float]:
    from tts_server.engine import EngineError, SynthesisRequest, create_engine

    try:
        engine = create_engine(
            backend=args.backend,
            mode="serial" if args.serial else "concurrent",
            model_dir=args.model_dir,
            device=args.device,
        )
    except EngineError as exc:
        raise EngineCommandError(str(exc)) from exc
    request = SynthesisRequest(args.text, args.language, args.voice, speed=args.speed)
    problems = engine.check(request)
    if problems:
        raise EngineCommandError("; ".join(f"{p.field}: {p.message}" for p in problems))
    try:
        print(f"loading {args.backend} weights…", file=sys.stderr)
        await engine.load()
        started = time.perf_counter()
        first = None
        segments = []
        async for segment in engine.synthesize(request):
            first = first if first is not None else time.perf_counter() - started
            segments.append(segment)
            print(f"segment {segment.index}: {segment.duration_s:.2f} s", file=sys.stderr)
        return segments, first or 0.0, time.perf_counter() - started
    except EngineError as exc:
        raise EngineCommandError(str(exc)) from exc
    finally:
        await engine.close()


def write_wav(path: Path, audio, sample_rate: int) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm.tobytes())


def run(args: argparse.Namespace) -> int:
    import asyncio

    import numpy as np
    from tts_server.engine import SAMPLE_RATE

    from tts_bench.artifacts.files import usable_file

    usable_file(args.out)  # a folder, a missing folder or a read-only place: one line, first
    segments, first_s, total_s = asyncio.run(_synthesize(args))
    if not segments:
        raise EngineCommandError("nothing to say: the text has no speakable words")
    audio = np.concatenate([s.audio for s in segments])
    write_wav(args.out, audio, SAMPLE_RATE)
    audio_s = len(audio) / SAMPLE_RATE
    print(
        f"wrote {args.out}: {audio_s:.2f} s of audio in {len(segments)} segments; "
        f"first segment {first_s * 1000:.0f} ms; real-time factor {total_s / audio_s:.3f}"
    )
    return 0
