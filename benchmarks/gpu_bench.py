"""GPU benchmark: the batched engine against serial mode on one GPU, side by side, in one run.

Two steps, because the lent GPU machine has no package registry and cannot install the text
front end (misaki, spaCy, espeak-ng):

1. `prepare` (here, with the full engine installed): phonemizes every piece of the corpus with
   the live G2P into a table (the same tokens, so the same phonemes and word spans), and
   measures the live G2P's own throughput on this CPU (the table hides its cost on the GPU
   machine, so it is reported separately).
2. `run` (on the GPU machine), with the same corpus, the table and a 3000 ms SLO:
   (a) the offline limit: audio-seconds per second of the bare backend (`TorchBackend.infer`,
       the server's dtype) at batch sizes 1..max, batches cut from the corpus's segments in
       order, no serving overhead;
   (b) the Q_max ladder against `python -m tts_server --backend torch` in serial mode, then
       in batched (concurrent) mode, on one rung grid, Locust with `--processes N` workers;
   (c) both qmax artifacts, their plots and `gpu-summary-<gpu>.json` (tts_bench.measure.gpu_summary).

Usage (from the repository root):
    PYTHONPATH=.:container python benchmarks/gpu_bench.py prepare --out STAGE
    PYTHONPATH=.:container python benchmarks/gpu_bench.py run --model-dir DIR \
        --g2p-table STAGE/g2p-table.json --g2p-cpu STAGE/g2p-cpu.json --out measurements
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RUNGS = "1,8,16,32,48,64,96,128,192,256,320,384,512"
WARMUP_TEXT = "Warm up."  # what KokoroEngine.warmup synthesises: it must be in the table


def log(message: str) -> None:
    print(f"gpu-bench: {message}", file=sys.stderr, flush=True)


def corpus_pieces(corpus_path: Path | None) -> list[tuple[str, str]]:
    """(language, piece text) for every piece the server will phonemize for the corpus."""
    from tts_server.engine.text import segment_text

    from tts_bench.measure.corpus import load_corpus

    default = REPO / "loadtest" / "corpus" / "en.txt"
    utterances = load_corpus(corpus_path or default)
    pieces = [("en", WARMUP_TEXT)]
    for utterance in utterances:
        for piece in segment_text(utterance.transcript)[0]:
            pieces.append((utterance.language, piece.text))
    return list(dict.fromkeys(pieces))


def prepare(args: argparse.Namespace) -> int:
    from tts_server.engine.g2p import g2p_tokens

    args.out.mkdir(parents=True, exist_ok=True)
    pieces = corpus_pieces(args.corpus)
    table: dict[str, dict[str, list[list[str]]]] = {}
    g2p_tokens("en", "Load the G2P first.")  # library load is not per-request cost
    started = time.perf_counter()
    for language, text in pieces:
        table.setdefault(language, {})[text] = [list(t) for t in g2p_tokens(language, text)]
    elapsed = time.perf_counter() - started
    (args.out / "g2p-table.json").write_text(json.dumps(table, ensure_ascii=False))
    cpu = {
        "pieces": len(pieces),
        "seconds": round(elapsed, 4),
        "pieces_per_s_one_thread": round(len(pieces) / elapsed, 2),
        "cpu": _cpu_model(),
        "command": "python benchmarks/gpu_bench.py prepare",
    }
    (args.out / "g2p-cpu.json").write_text(json.dumps(cpu, indent=2))
    log(f"{len(pieces)} pieces phonemized in {elapsed:.2f} s on one thread of {cpu['cpu']}")
    return 0


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def corpus_items(backend, table_path: Path, corpus_path: Path | None):  # type: ignore[no-untyped-def]
    """The corpus as the engine would cut it: InferenceItems, and the utterance count."""
    import numpy as np
    from tts_server.engine.backend import MAX_PHONEMES, InferenceItem
    from tts_server.engine.g2p import Phonemizer, load_table, split_phonemized
    from tts_server.engine.text import segment_text

    from tts_bench.measure.corpus import load_corpus

    phonemizer = Phonemizer(backend.vocab, table=load_table(table_path))
    utterances = load_corpus(corpus_path or REPO / "loadtest" / "corpus" / "en.txt")
    items = []
    for utterance in utterances:
        pack = backend.voices[utterance.voice]
        for piece in segment_text(utterance.transcript)[0]:
            phonemized = phonemizer.phonemize(piece.text, utterance.language)
            for chunk in split_phonemized(phonemized, MAX_PHONEMES):
                if not chunk.phonemes.strip():
                    continue
                ids = np.array([backend.vocab[c] for c in chunk.phonemes], np.int64)
                items.append(InferenceItem(ids, pack[len(ids) - 1].reshape(256), piece.speed_ratio))
    return items, len(utterances)


def offline_sweep(args: argparse.Namespace) -> dict[str, object]:
    """Audio-seconds per second of `TorchBackend.infer` at each batch size."""
    from tts_server.engine import SAMPLE_RATE
    from tts_server.engine.torch_backend import TorchBackend

    backend = TorchBackend(args.model_dir, device=args.device, max_batch=max(args.batch_sizes))
    items, utterance_count = corpus_items(backend, args.g2p_table, args.corpus)
    singles = [backend.infer([item])[0] for item in items]  # warm-up, and each item's length
    corpus_audio_s = sum(len(out.audio) for out in singles) / SAMPLE_RATE
    by_batch: dict[int, float] = {}
    for size in args.batch_sizes:
        batches = [
            [items[(start + k) % len(items)] for k in range(size)]
            for start in range(0, max(len(items), size) * 2, size)
        ]
        backend.infer(batches[0])  # this shape's first pass (allocator, cudnn) is not counted
        audio_s, passes, started = 0.0, 0, time.perf_counter()
        while passes < len(batches) and (passes < 3 or time.perf_counter() - started < 4):
            outputs = backend.infer(batches[passes])
            audio_s += sum(len(out.audio) for out in outputs) / SAMPLE_RATE
            passes += 1
        elapsed = time.perf_counter() - started
        by_batch[size] = round(audio_s / elapsed, 2)
        log(f"offline batch {size}: {by_batch[size]:.1f} audio-s/s ({passes} passes)")
    backend.close()
    return {
        "dtype": "float32",
        "audio_s_per_s_by_batch": by_batch,
        "corpus_mean_audio_s": corpus_audio_s / utterance_count,
        "segments": len(items),
    }


def ladder(args: argparse.Namespace, mode: str, rungs: str) -> Path:
    from tts_bench.artifacts.fingerprint import Transport
    from tts_bench.measure.ladder import LadderSchedule, parse_rungs
    from tts_bench.measure.ladder_locust import LadderRequest, run_ladder
    from tts_bench.measure.local_server import LocalServer

    env = {**os.environ, "ENGINE_MODE": mode, "ENGINE_G2P_TABLE": str(args.g2p_table.resolve())}
    env["ENGINE_MAX_BATCH"] = str(max(args.batch_sizes))
    env["ENGINE_DEVICE"] = args.device
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), str(REPO / "container"), env.get("PYTHONPATH", "")]
    )
    server_log = args.out / f"server-{mode}.log" if args.server_logs else None
    with LocalServer(
        ["--backend", "torch", "--model-dir", str(args.model_dir)], env=env, log_path=server_log
    ) as server:
        ping = server.wait_ready(progress=log)
        schedule = LadderSchedule(
            rungs=parse_rungs(rungs), hold_s=args.hold_s, measure_s=args.measure_s,
            idle_s=args.idle_s,
        )  # fmt: skip
        request = LadderRequest(
            host=server.url, schedule=schedule, slo_ms=args.slo_ms,
            transport=Transport.LOCAL_HTTP.value, corpus=args.corpus, model="kokoro-82m",
            out=args.out, processes=args.processes,
        )  # fmt: skip
        log(f"{mode}: ladder {rungs} ({schedule.duration_s:.0f} s)")
        return run_ladder(
            request, ping.fingerprint(Transport.LOCAL_HTTP), lambda line: log(f"{mode}: {line}")
        )


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.schema import QmaxArtifact
    from tts_bench.measure.gpu_summary import OfflineSweep, gpu_summary
    from tts_bench.measure.plots import plot_qmax

    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/gpu_bench.py " + shlex.join(sys.argv[1:])
    offline = OfflineSweep(**{k: v for k, v in offline_sweep(args).items() if k != "segments"})
    serial_rungs = ",".join(args.rungs.split(",")[: args.serial_rung_count or None])
    paths = {
        "serial": ladder(args, "serial", serial_rungs),
        "concurrent": ladder(args, "concurrent", args.rungs),
    }
    artifacts = {m: QmaxArtifact.model_validate_json(p.read_text()) for m, p in paths.items()}
    for path, artifact in zip(paths.values(), artifacts.values(), strict=True):
        plot_qmax(artifact, path.with_suffix(".png"))
    notes = {"g2p": "phonemes from a table made by the live G2P on a CPU (gpu_bench prepare)"}
    if args.g2p_cpu and args.g2p_cpu.is_file():
        notes["g2p_cpu"] = args.g2p_cpu.read_text()
    if args.serial_rung_count:
        notes["serial_rungs"] = f"serial ran the grid's first {args.serial_rung_count} rungs"
    summary = gpu_summary(
        artifacts["serial"], artifacts["concurrent"], offline, args.weights, command, notes
    )
    target = args.out / f"gpu-summary-{args.gpu_label}.json"
    target.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    prep = sub.add_parser("prepare", help="G2P table and CPU G2P throughput (needs the front end)")
    prep.add_argument("--out", type=Path, required=True)
    prep.add_argument("--corpus", type=Path, default=None)
    prep.set_defaults(handler=prepare)
    go = sub.add_parser("run", help="offline sweep and both ladders (needs a CUDA GPU)")
    go.add_argument("--model-dir", type=Path, required=True)
    go.add_argument("--g2p-table", type=Path, required=True)
    go.add_argument("--g2p-cpu", type=Path, default=None)
    go.add_argument("--corpus", type=Path, default=None)
    go.add_argument("--out", type=Path, default=REPO / "measurements")
    go.add_argument("--rungs", default=DEFAULT_RUNGS)
    go.add_argument("--serial-rung-count", type=int, default=0, help="0: the whole grid")
    go.add_argument("--hold-s", type=float, default=12.0)
    go.add_argument("--measure-s", type=float, default=8.0)
    go.add_argument("--idle-s", type=float, default=2.0)
    go.add_argument("--slo-ms", type=float, default=3000.0)
    go.add_argument("--processes", type=int, default=8)
    go.add_argument(
        "--batch-sizes", type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 2, 4, 8, 16, 32, 64],
    )  # fmt: skip
    go.add_argument("--weights", default="real-int8-converted")
    go.add_argument("--gpu-label", default="h200")
    go.add_argument("--server-logs", action="store_true")
    go.add_argument("--device", default="cuda", help="cpu only to try the script itself")
    go.set_defaults(handler=run)
    args = parser.parse_args()
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
