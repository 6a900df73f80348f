"""GPU benchmark: the fused engine against the wave-1 engine, and serial against batched, on one GPU.

Steps, because the lent GPU machine has no package registry and cannot install the text
front end (misaki, spaCy, espeak-ng):

1. `prepare` (here, with the full engine installed): phonemizes every piece of the corpus with
   the live G2P into a table (the same tokens, so the same phonemes and word spans), and
   measures the live G2P's own throughput on this CPU.
2. `device-offline` (on the GPU machine), each engine in a fresh process (`offline`):
   segments and audio-seconds per second of the bare backend (`TorchBackend.infer`) by batch
   size, batches cut from the corpus's segments in order, for the wave-1 engine (a staged
   `git archive 5495c61 container`), the new engine eager, and compiled in float32 and
   bfloat16 (each with parity against float32 eager and a saved compile cache); the shipped
   dtype (bfloat16 only if padded-vs-alone r >= 0.999); then a fresh server's time to ready
   eager, compiled with empty caches and compiled with the saved cache.
3. `device-ladders` (on the GPU machine): per mode, one warm-cache server, a scout ladder on a
   coarse grid, then the final ladder stepping by at most `--step` from the scout's last pass.
4. `summarize` (here): `gpu-summary-<gpu>.json` and the plots (tts_bench.measure.gpu_summary).

Usage (from the repository root):
    PYTHONPATH=.:container python benchmarks/gpu_bench.py prepare --out STAGE
    PYTHONPATH=.:container python benchmarks/gpu_bench.py device-offline --model-dir DIR \
        --g2p-table STAGE/g2p-table.json --baseline-root BASELINE/container --out RUN
    PYTHONPATH=.:container python benchmarks/gpu_bench.py device-ladders --model-dir DIR \
        --g2p-table STAGE/g2p-table.json --out RUN --mega-cache RUN/mega-cache-float32.bin
    PYTHONPATH=.:container python benchmarks/gpu_bench.py summarize --run RUN --artifacts RUN \
        --out measurements --command "..."
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
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


def _sweep(backend, items, sizes: list[int], sample_rate: int) -> dict[str, dict[int, float]]:  # type: ignore[no-untyped-def]
    """Segments and audio-seconds per second of `backend.infer` at each batch size.

    Batches are cut from the corpus's segments in order (cyclically); each size's first pass
    (allocator, cuDNN plans, a compiled graph's first run) is not counted.
    """
    segments_per_s: dict[int, float] = {}
    audio_per_s: dict[int, float] = {}
    for size in sizes:
        batches = [
            [items[(start + k) % len(items)] for k in range(size)]
            for start in range(0, max(len(items), size) * 4, size)
        ]
        backend.infer(batches[0])
        audio_s, segments, passes, started = 0.0, 0, 0, time.perf_counter()
        while passes < len(batches) and (passes < 3 or time.perf_counter() - started < 3):
            outputs = backend.infer(batches[passes])
            audio_s += sum(len(out.audio) for out in outputs) / sample_rate
            segments += len(outputs)
            passes += 1
        elapsed = time.perf_counter() - started
        segments_per_s[size] = round(segments / elapsed, 2)
        audio_per_s[size] = round(audio_s / elapsed, 2)
        log(f"offline batch {size}: {segments_per_s[size]:.1f} segments/s, "
            f"{audio_per_s[size]:.1f} audio-s/s ({passes} passes)")  # fmt: skip
    return {"segments_per_s_by_batch": segments_per_s, "audio_s_per_s_by_batch": audio_per_s}


def _parity(backend, items) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The backend's own pass options against float32 eager on every corpus segment alone,
    and a short segment padded with a long one against itself alone (same options)."""
    import numpy as np
    from tts_server.engine.torch_backend import PassOptions, forward_batch

    from tests.engine.speech import log_mel_distance

    reference = PassOptions(dtype="float32")
    mel_db, mel_r, f0_r, equal = [], [], [], 0
    for item in items:
        (ref_audio,), (ref_d,), (ref_f0,) = forward_batch(backend.model, [item], options=reference)
        (audio,), (durations,), (f0,) = forward_batch(
            backend.model, [item], options=backend.options
        )
        equal += int(np.array_equal(durations, ref_d))
        if len(audio) == len(ref_audio):
            db, r = log_mel_distance(ref_audio, audio)
            mel_db.append(db)
            mel_r.append(r)
            f0_r.append(float(np.corrcoef(ref_f0, f0)[0, 1]))
    by_length = sorted(items, key=lambda it: len(it.token_ids))
    short, long = by_length[0], by_length[-1]
    (padded, _), (d_padded, _), _ = forward_batch(
        backend.model, [short, long], options=backend.options
    )
    (alone,), (d_alone,), _ = forward_batch(backend.model, [short], options=backend.options)
    same_length = len(padded) == len(alone)
    return {
        "against": "float32 eager, each corpus segment alone",
        "segments": len(items),
        "durations_equal": equal == len(items),
        "durations_equal_count": equal,
        "log_mel_db_mean": round(float(np.mean(mel_db)), 3) if mel_db else None,
        "log_mel_db_max": round(float(np.max(mel_db)), 3) if mel_db else None,
        "log_mel_r_min": round(float(np.min(mel_r)), 4) if mel_r else None,
        "f0_r_mean": round(float(np.mean(f0_r)), 5) if f0_r else None,
        "f0_r_min": round(float(np.min(f0_r)), 5) if f0_r else None,
        "padded_vs_alone_durations_equal": bool(np.array_equal(d_padded, d_alone)),
        "padded_vs_alone_r": round(float(np.corrcoef(padded, alone)[0, 1]), 6)
        if same_length
        else None,
    }


def _profile(backend, items, size: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """GPU time in kernels against the pass's wall time at one batch size (torch.profiler
    over three passes after a warm one): the gaps are where the GPU waited for the host."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    gpu = torch.cuda.is_available()
    batch = [items[k % len(items)] for k in range(size)]
    backend.infer(batch)
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if gpu else [])]
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        for _ in range(3):
            backend.infer(batch)  # ends with a wait for the audio: the GPU is done
        wall_s = time.perf_counter() - started
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    intervals = sorted((e.time_range.start, e.time_range.end) for e in kernels)
    busy_us, reach = 0.0, float("-inf")
    for start, end in intervals:  # the union of kernel intervals: overlap counted once
        if end > reach:
            busy_us += end - max(start, reach)
            reach = end
    result = {
        "passes": 3,
        "wall_ms_per_pass": round(1000 * wall_s / 3, 2),
        "kernel_ms_per_pass": round(busy_us / 1000 / 3, 2),
        "kernels_per_pass": round(len(kernels) / 3, 1),
        "gpu_busy_share": round(busy_us / 1e6 / wall_s, 3),
    }
    log(f"profile batch {size}: {result}")
    return result


def offline(args: argparse.Namespace) -> int:
    """One engine's offline sweep in this process (the engine whose `tts_server` is on the
    path: the product's, or a staged wave-1 copy): load, warm-up, sweep, optional parity."""
    import torch
    from tts_server.engine import SAMPLE_RATE
    from tts_server.engine.torch_backend import TorchBackend

    started = time.perf_counter()
    backend = TorchBackend(args.model_dir, device=args.device, max_batch=max(args.batch_sizes))
    load_s = time.perf_counter() - started
    items, utterance_count = corpus_items(backend, args.g2p_table, args.corpus)
    warm = getattr(backend, "warm", None)
    warm_s = warm() if warm else 0.0  # the wave-1 engine has no warm-up of its own
    if args.save_cache:
        from tts_server.engine.compile_cache import save_cache

        log(f"mega-cache: {save_cache(args.save_cache)} bytes to {args.save_cache}")
    singles = [backend.infer([item])[0] for item in items]  # each item's length
    corpus_audio_s = sum(len(out.audio) for out in singles) / SAMPLE_RATE
    result: dict[str, object] = {
        "label": args.label,
        "settings": getattr(backend, "settings", {}),
        "load_s": round(load_s, 2),
        "warmup_s": round(warm_s, 2),
        "segments": len(items),
        "corpus_mean_audio_s": corpus_audio_s / utterance_count,
        "mean_segment_audio_s": corpus_audio_s / len(items),
        **_sweep(backend, items, args.batch_sizes, SAMPLE_RATE),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
    }
    if args.parity:
        result["parity"] = _parity(backend, items)
        log(f"parity: {result['parity']}")
    if args.profile:
        result["profile"] = {str(b): _profile(backend, items, b) for b in args.profile}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    backend.close()
    return 0


def _offline_child(args: argparse.Namespace, label: str, engine_root: Path, env: dict[str, str],
                   extra: list[str]) -> dict[str, object]:  # fmt: skip
    """`offline` in a fresh process, `tts_server` imported from `engine_root`."""
    target = args.out / f"offline-{label}.json"
    child_env = {
        **os.environ,
        **env,
        "PYTHONPATH": os.pathsep.join(
            [str(engine_root), str(REPO), os.environ.get("PYTHONPATH", "")]
        ),
    }
    command = [
        sys.executable, str(Path(__file__).resolve()), "offline", "--label", label,
        "--model-dir", str(args.model_dir), "--g2p-table", str(args.g2p_table),
        "--out", str(target), "--batch-sizes", ",".join(map(str, args.batch_sizes)),
        "--device", args.device, *extra,
    ]  # fmt: skip
    if args.corpus:
        command += ["--corpus", str(args.corpus)]
    log(f"offline {label}: {shlex.join(command)} ({env})")
    started = time.perf_counter()
    subprocess.run(command, env=child_env, check=True)
    log(f"offline {label}: done in {time.perf_counter() - started:.0f} s")
    return json.loads(target.read_text())


def _server_env(args: argparse.Namespace, mode: str, extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, "ENGINE_MODE": mode, "ENGINE_G2P_TABLE": str(args.g2p_table.resolve())}
    env["ENGINE_MAX_BATCH"] = str(args.max_batch)
    env["ENGINE_DEVICE"] = args.device
    root = getattr(args, "server_root", None) or REPO  # whose server code runs
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root), str(root / "container"), env.get("PYTHONPATH", "")]
    )
    return {**env, **extra}


def _fresh_caches(root: Path) -> dict[str, str]:
    """Empty Inductor and Triton cache folders: a start that finds nothing compiled on disk."""
    root.mkdir(parents=True, exist_ok=True)
    inductor, triton = Path(tempfile.mkdtemp(dir=root)), Path(tempfile.mkdtemp(dir=root))
    return {"TORCHINDUCTOR_CACHE_DIR": str(inductor), "TRITON_CACHE_DIR": str(triton)}


def time_to_ready(args: argparse.Namespace, label: str, extra: dict[str, str]) -> dict[str, object]:
    """A fresh server process from spawn to ready (/ping 200), with its start-up markers."""
    from tts_bench.serving.local_server import LocalServer

    env = _server_env(args, "concurrent", {**_fresh_caches(args.cache_root), **extra})
    with LocalServer(
        ["--backend", "torch", "--model-dir", str(args.model_dir)], env=env,
        log_path=args.out / f"server-ready-{label}.log",
    ) as server:  # fmt: skip
        server.wait_ready(timeout_s=540, progress=lambda line: log(f"{label}: {line}"))
        ready_s = time.time() - (server.spawned_at or 0.0)
        markers = {k: round(v - (server.spawned_at or 0.0), 2) for k, v in server.markers().items()}
    log(f"{label}: ready after {ready_s:.1f} s")
    return {"ready_s": round(ready_s, 2), "markers": markers, "env": extra}


# What a pass below float32 must keep to ship (issue 29): against float32 eager on every corpus
# segment alone, and a short item padded with a long one against itself alone.
PARITY_BOUNDS = {
    "log_mel_db_mean": ("<=", 0.5),
    "log_mel_r_min": (">=", 0.999),
    "f0_r_min": (">=", 0.9999),
    "padded_vs_alone_r": (">=", 0.999),
}


def parity_failures(parity: dict[str, object]) -> list[str]:
    """Which of the shipping bounds `parity` misses (empty: it keeps parity)."""
    failures = []
    if not parity.get("durations_equal") or not parity.get("padded_vs_alone_durations_equal"):
        failures.append("durations differ")
    for key, (op, bound) in PARITY_BOUNDS.items():
        value = parity.get(key)
        ok = isinstance(value, int | float) and (value <= bound if op == "<=" else value >= bound)
        if not ok:
            failures.append(f"{key} {value} (needs {op} {bound})")
    return failures


def shipped_dtype(results: dict[str, dict[str, object]]) -> str:
    """The fastest compiled dtype at batch 64 that keeps parity; float32 when none below it
    does (float32 is the reference the bounds are measured against)."""
    best, best_rate = "float32", -1.0
    for label, result in results.items():
        if not label.startswith("compiled-") or "parity" not in result:
            continue
        dtype = label.removeprefix("compiled-")
        rate = float(result["segments_per_s_by_batch"].get("64", 0))  # type: ignore[attr-defined]
        keeps = dtype == "float32" or not parity_failures(result["parity"])  # type: ignore[arg-type]
        if keeps and rate > best_rate:
            best, best_rate = dtype, rate
    return best


def device_offline(args: argparse.Namespace) -> int:
    """On the GPU machine: every engine's offline sweep, parity, compile cache, start-up times.

    A variant that fails is logged and left out; the rest still run.
    """
    args.out.mkdir(parents=True, exist_ok=True)
    product = REPO / "container"
    variants: list[tuple[str, Path, dict[str, str], list[str]]] = [
        ("baseline", args.baseline_root, {}, []),
    ]
    if args.eager:
        variants.append(
            ("eager-fp32", product, {"ENGINE_COMPILE": "0", "ENGINE_DTYPE": "float32"}, [])
        )
    for dtype in args.compiled_dtypes:
        env = {"ENGINE_COMPILE": "1", "ENGINE_DTYPE": dtype, **_fresh_caches(args.cache_root)}
        cache = args.out / f"mega-cache-{dtype}.bin"
        extra = ["--parity", "--save-cache", str(cache)]
        if dtype == "float32" and args.profile:
            extra += ["--profile", ",".join(map(str, args.profile))]
        variants.append((f"compiled-{dtype}", product, env, extra))
    results: dict[str, dict[str, object]] = {}
    for label, root, env, extra in variants:
        try:
            results[label] = _offline_child(args, label, root, env, extra)
        except subprocess.CalledProcessError as exc:
            log(f"offline {label} FAILED: {exc}")
    dtype = shipped_dtype(results)
    cache = args.out / f"mega-cache-{dtype}.bin"
    (args.out / "ship.json").write_text(json.dumps({"dtype": dtype, "mega_cache": str(cache)}))
    log(f"shipping dtype {dtype}")
    ready: dict[str, object] = {}
    for design in args.ready_designs:  # ENGINE_PROCESS values; the first is the summary's
        first = design == args.ready_designs[0]
        suffix = "" if first else f"-process{design}"
        base = {"ENGINE_DTYPE": dtype, "ENGINE_PROCESS": design}
        if first:  # the other designs: the warm start alone, to compare them
            eager, cold = {**base, "ENGINE_COMPILE": "0"}, {**base, "ENGINE_COMPILE": "1"}
            ready["eager"] = time_to_ready(args, "eager", eager)
            ready["cold"] = time_to_ready(args, "cold", cold)
        if cache.is_file():
            warm = {**base, "ENGINE_COMPILE": "1", "ENGINE_COMPILE_CACHE": str(cache)}
            ready["warm" + suffix] = time_to_ready(args, "warm" + suffix, warm)
        (args.out / "ready.json").write_text(json.dumps(ready, indent=2) + "\n")
    table = [f"{'engine':<18}" + "".join(f"{b:>9}" for b in args.batch_sizes)]
    for label, result in results.items():
        by_batch = result["segments_per_s_by_batch"]
        row = "".join(f"{by_batch.get(str(b), 0):>9.1f}" for b in args.batch_sizes)  # type: ignore[attr-defined]
        table.append(f"{label:<18}{row}  warm-up {result['warmup_s']} s")
    print("segments/s by batch size\n" + "\n".join(table))
    print(json.dumps({k: v["ready_s"] for k, v in ready.items()}))  # type: ignore[index]
    return 0


def refined_grid(last_pass: int, first_fail: int, step: float) -> list[int]:
    """Rungs from `last_pass` up to `first_fail`, each at most `step` (relative) above the last."""
    rungs = [last_pass]
    while rungs[-1] < first_fail:
        rungs.append(max(rungs[-1] + 1, int(rungs[-1] * (1 + step))))
    return rungs


def narrowing_grid(last_pass: int, first_fail: int, count: int) -> list[int]:
    """Up to `count` rungs strictly between a bracket's ends, evenly spaced in ratio: a second
    scout over a bracket too wide for fine steps (run 8's 1..288 became 94 fine rungs, 17 min)."""
    ratio = (first_fail / last_pass) ** (1 / (count + 1))
    inner = {round(last_pass * ratio**k) for k in range(1, count + 1)}
    return sorted(r for r in inner if last_pass < r < first_fail)


def final_grid(
    coarse: list[int], last_pass: int, first_fail: int, args: argparse.Namespace
) -> list[int]:
    """The refined ladder's rungs: fine steps from a little below the scout's last pass (so a
    ladder that fails earlier than the scout did still ends within `step` of Q_max) on past the
    scout's first fail by `overshoot` (so one that passes where the scout failed, as run 9's
    third float16 repeat did at 540, still meets its knee); the ladder stops at its first
    failure, so rungs above the knee cost nothing."""
    start = max(1, min(last_pass, int(last_pass * (1 - args.fine_below))))
    below = [r for r in coarse if r < start]
    top = max(first_fail + 1, int(first_fail * (1 + max(args.step, args.overshoot))))
    return sorted({1, *below[-args.keep_below :], *refined_grid(start, top, args.step)})


def _run_ladder(args: argparse.Namespace, server, ping, label: str, rungs: list[int],  # type: ignore[no-untyped-def]
                hold: tuple[float, float, float], out: Path) -> Path:  # fmt: skip
    from tts_bench.artifacts.fingerprint import Transport
    from tts_bench.measure.ladder.locust_child import LadderRequest, run_ladder
    from tts_bench.measure.ladder.schedule import LadderSchedule

    out.mkdir(parents=True, exist_ok=True)
    schedule = LadderSchedule(rungs=tuple(rungs), hold_s=hold[0], measure_s=hold[1], idle_s=hold[2])
    # The point Q_max, as runs 1-9 compared the engines (their intervals recorded beside it):
    # the scout's 7 s windows decide few rungs, and the refined grid starts from its last pass.
    request = LadderRequest(
        host=server.url, schedule=schedule, slo_ms=args.slo_ms,
        transport=Transport.LOCAL_HTTP.value, corpus=args.corpus, model="kokoro-82m",
        out=out, processes=args.processes, underrun_slo=args.underrun_slo, q_max_basis="point",
    )  # fmt: skip
    log(f"{label}: ladder {rungs} ({schedule.duration_s:.0f} s)")
    return run_ladder(
        request, ping.fingerprint(Transport.LOCAL_HTTP), lambda line: log(f"{label}: {line}")
    )


def _bracket(path: Path) -> tuple[int | None, int | None]:
    from tts_bench.artifacts.qmax import QmaxArtifact

    artifact = QmaxArtifact.model_validate_json(path.read_text())
    fails = [r.concurrency for r in artifact.rungs if not r.passes]
    return artifact.q_max, (min(fails) if fails else None)


def device_ladders(args: argparse.Namespace) -> int:
    """On the GPU machine: each mode's ladder on one warm-cache server, first on a coarse grid
    with short holds (the scout), then on a grid fine enough (`--step`) between the scout's
    last pass and first fail, with full holds (the artifact the summary reads)."""
    from tts_bench.serving.local_server import LocalServer

    args.out.mkdir(parents=True, exist_ok=True)
    env = {"ENGINE_COMPILE_CACHE": str(args.mega_cache)} if args.mega_cache.is_file() else {}
    if args.dtype:
        env["ENGINE_DTYPE"] = args.dtype
    env.update(dict(pair.split("=", 1) for pair in args.server_env if pair))
    for mode in args.modes:
        coarse = [int(x) for x in args.coarse_rungs[mode].split(",")]
        server_env = _server_env(args, mode, {**_fresh_caches(args.cache_root), **env})
        server_log = args.out / f"server-{args.label}{mode}.log" if args.server_logs else None
        with LocalServer(
            ["--backend", "torch", "--model-dir", str(args.model_dir)], env=server_env,
            log_path=server_log,
        ) as server:  # fmt: skip
            ping = server.wait_ready(
                timeout_s=540, progress=lambda line, m=mode: log(f"{m}: {line}")
            )
            ready_s = time.time() - (server.spawned_at or 0.0)
            log(f"{mode}: ready after {ready_s:.1f} s")
            (args.out / f"ready-{args.label}{mode}.json").write_text(
                json.dumps({"ready_s": round(ready_s, 2), "env": env})
            )
            scout_hold = (args.scout_hold_s, args.scout_measure_s, 1.0)
            scout = _run_ladder(args, server, ping, f"{args.label}{mode}-scout", coarse,
                                scout_hold, args.out / f"scout-{args.label}{mode}")  # fmt: skip
            last_pass, first_fail = _bracket(scout)
            log(f"{mode}: scout bracket {last_pass}..{first_fail}")
            narrowing = 0
            while (
                last_pass is not None and first_fail is not None
                and len(refined_grid(last_pass, first_fail, args.step)) > args.max_fine_rungs
            ):  # fmt: skip
                inner = narrowing_grid(last_pass, first_fail, args.narrowing_rungs)
                if not inner:
                    break
                narrowing += 1
                scout = _run_ladder(args, server, ping, f"{args.label}{mode}-scout{narrowing}",
                                    inner, scout_hold,
                                    args.out / f"scout{narrowing}-{args.label}{mode}")  # fmt: skip
                inner_pass, inner_fail = _bracket(scout)
                if inner_pass is None and inner_fail is None:
                    break  # no rung decided anything: keep the bracket we have
                # A narrowing rung that fails moves the top down; one that passes, the bottom up.
                last_pass = inner_pass if inner_pass is not None else last_pass
                first_fail = inner_fail if inner_fail is not None else first_fail
                log(f"{mode}: scout {narrowing} bracket {last_pass}..{first_fail}")
            grid = coarse
            if last_pass is not None and first_fail is not None:
                grid = final_grid(coarse, last_pass, first_fail, args)
            hold = (args.hold_s, args.measure_s, args.idle_s)
            _run_ladder(args, server, ping, f"{args.label}{mode}", grid, hold, args.out)
    return 0


def summarize(args: argparse.Namespace) -> int:
    """The summary from a device run's folder: both final qmax artifacts (with plots), the
    shipped engine's and the wave-1 engine's offline sweeps, parity and start-up times."""
    from tts_bench.artifacts.qmax import QmaxArtifact
    from tts_bench.measure.gpu_summary import EngineFacts, OfflineSweep, Parity, gpu_summary
    from tts_bench.measure.plots import plot_qmax

    found: dict[str, tuple[Path, QmaxArtifact]] = {}
    paths = [args.serial, args.batched] if args.serial else args.artifacts.glob("qmax-*.json")
    for path in sorted(p for p in paths if "localnvidia" in p.name):
        artifact = QmaxArtifact.model_validate_json(path.read_text())
        env = artifact.fingerprint.performance_env if artifact.fingerprint else {}
        found[env.get("ENGINE_MODE", "?")] = (path, artifact)
    (serial_path, serial), (batched_path, batched) = found["serial"], found["concurrent"]
    dtype = batched.fingerprint.performance_env["TORCH_DTYPE"] if batched.fingerprint else "?"
    shipped = json.loads((args.run / f"offline-compiled-{dtype}.json").read_text())
    baseline = json.loads((args.run / "offline-baseline.json").read_text())
    ready = json.loads((args.run / "ready.json").read_text())
    offline = OfflineSweep(
        dtype=dtype,
        audio_s_per_s_by_batch=shipped["audio_s_per_s_by_batch"],
        corpus_mean_audio_s=shipped["corpus_mean_audio_s"],
    )
    facts = EngineFacts(
        segments_per_s_by_batch=shipped["segments_per_s_by_batch"],
        baseline_segments_per_s_by_batch=baseline["segments_per_s_by_batch"],
        parity=Parity.model_validate(shipped["parity"]),
        compile_warmup_s=shipped["warmup_s"],
        ready_s_eager=ready.get(f"eager{args.design}", {}).get("ready_s"),
        ready_s_cold_cache=ready.get(f"cold{args.design}", {}).get("ready_s"),
        ready_s_warm_cache=ready.get(f"warm{args.design}", {}).get("ready_s"),
    )
    notes = {"g2p": "phonemes from a table made by the live G2P on a CPU (gpu_bench prepare)"}
    if args.g2p_cpu and args.g2p_cpu.is_file():
        notes["g2p_cpu"] = args.g2p_cpu.read_text()
    for other in sorted(args.run.glob("offline-compiled-*.json")):
        result = json.loads(other.read_text())
        parity = result.get("parity", {})
        notes[result["label"]] = (
            f"{result['segments_per_s_by_batch']['64']} segments/s at 64; padded-vs-alone r "
            f"{parity.get('padded_vs_alone_r')}, log-mel {parity.get('log_mel_db_mean')} dB"
        )
    notes["shipped"] = f"{dtype}: compiled, the fastest variant that keeps every parity bound"
    notes.update(dict(note.split("=", 1) for note in args.note))
    summary = gpu_summary(serial, batched, offline, args.weights, args.command, notes, facts)
    args.out.mkdir(parents=True, exist_ok=True)
    for path, artifact in ((serial_path, serial), (batched_path, batched)):
        if args.plots:
            plot_qmax(artifact, path.with_suffix(".png"))
    target = args.out / f"gpu-summary-{args.gpu_label}.json"
    target.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


def served(args: argparse.Namespace) -> int:
    """Per rung of a ladder: requests/s, the audio served per second summed from the audio
    each stream received (its bytes, as the client counted them) against the derived figure
    (requests/s x the corpus's mean audio), the stall share and p95; and the two Q_max, the
    TTFAB SLO's alone and with at most `--underrun-slo` of streams stalled."""
    from tts_bench.artifacts.qmax import QmaxArtifact
    from tts_bench.artifacts.rungs import rung_meets_slo
    from tts_bench.measure.ladder.statistics import in_window
    from tts_bench.measure.samples import Outcome, read_samples, samples_path

    rows: list[dict[str, object]] = []
    for path in args.artifacts:
        artifact = QmaxArtifact.model_validate_json(path.read_text())
        if artifact.ladder is None:
            raise SystemExit(f"{path}: no ladder settings, so no measure windows")
        samples = read_samples(samples_path(path))
        audio_ms: dict[int, float] = {}
        window_s: dict[int, float] = {}
        for index, level in enumerate(artifact.ladder.rungs):
            w0, w1 = artifact.ladder.measure_window(index)
            done = in_window(samples, level, w0, w1)
            ok = [x for x in done if x.outcome is Outcome.OK]
            audio_ms[level] = sum(x.audio_ms or 0.0 for x in ok)
            window_s[level] = w1 - w0
        plain = stall = None
        plain_open = stall_open = True
        for rung in sorted(artifact.rungs, key=lambda r: r.concurrency):
            failed = rung.rejected + rung.errors
            meets = rung.usable and rung_meets_slo(
                rung.ttfab_p95_ms, failed, rung.completed, artifact.slo_ms
            )
            meets_stall = rung.usable and rung_meets_slo(
                rung.ttfab_p95_ms, failed, rung.completed, artifact.slo_ms,
                rung.underrun_share, args.underrun_slo,
            )  # fmt: skip
            plain_open = plain_open and meets
            stall_open = stall_open and meets_stall
            plain = rung.concurrency if plain_open else plain
            stall = rung.concurrency if stall_open else stall
            seconds = window_s.get(rung.concurrency, 0.0)
            rows.append({
                "artifact": path.name, "c": rung.concurrency, "rps": rung.achieved_rps,
                "ttfab_p95_ms": rung.ttfab_p95_ms,
                "served_audio_s_per_s": round(audio_ms.get(rung.concurrency, 0.0) / 1000 / seconds, 1)
                if seconds else None,
                "derived_audio_s_per_s": round(rung.achieved_rps * args.mean_audio_s, 1),
                "underrun_share": rung.underrun_share, "stall_ms_p95": rung.stall_ms_p95,
                "rtf_p95": rung.rtf_p95,
            })  # fmt: skip
        rows.append({"artifact": path.name, "q_max_ttfab": plain, "q_max_stall_aware": stall})
        log(f"{path.name}: Q_max {plain} (TTFAB SLO), {stall} (and <= {args.underrun_slo} stalled)")
    text = "\n".join(json.dumps(row) for row in rows)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


def _batch_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--g2p-table", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--device", default="cuda", help="cpu only to try the script itself")
    parser.add_argument("--batch-sizes", type=_batch_list, default=[1, 8, 16, 32, 64, 128])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    prep = sub.add_parser("prepare", help="G2P table and CPU G2P throughput (needs the front end)")
    prep.add_argument("--out", type=Path, required=True)
    prep.add_argument("--corpus", type=Path, default=None)
    prep.set_defaults(handler=prepare)

    one = sub.add_parser("offline", help="one engine's offline sweep in this process")
    _common(one)
    one.add_argument("--label", required=True)
    one.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    one.add_argument("--parity", action="store_true")
    one.add_argument("--save-cache", type=Path, default=None, help="mega-cache file to write")
    one.add_argument(
        "--profile", type=_batch_list, default=[], help="batch sizes to profile (kernels vs gaps)"
    )
    one.set_defaults(handler=offline)

    dev = sub.add_parser("device-offline", help="all engines' sweeps, parity, start-up times")
    _common(dev)
    dev.add_argument("--baseline-root", type=Path, required=True,
                     help="folder holding the wave-1 tts_server package (git archive 5495c61)")  # fmt: skip
    dev.add_argument("--out", type=Path, required=True)
    dev.add_argument(
        "--compiled-dtypes", type=lambda s: s.split(","), default=["float32", "bfloat16"]
    )
    dev.add_argument(
        "--cache-root", type=Path, default=Path(tempfile.gettempdir()) / "gpu-bench-caches"
    )
    dev.add_argument("--max-batch", type=int, default=64)
    dev.add_argument("--eager", action="store_true", help="also sweep the eager float32 engine")
    dev.add_argument("--profile", type=_batch_list, default=[1, 64], help="compiled float32")
    dev.add_argument(
        "--ready-designs", type=lambda s: s.split(","), default=["1", "0"],
        help="ENGINE_PROCESS values whose start-up is timed (the first: the summary's)",
    )  # fmt: skip
    dev.set_defaults(handler=device_offline)

    lad = sub.add_parser("device-ladders", help="serial and batched ladders, refined near Q_max")
    _common(lad)
    lad.add_argument("--out", type=Path, required=True)
    lad.add_argument("--modes", type=lambda s: s.split(","), default=["serial", "concurrent"])
    lad.add_argument("--serial-coarse", default="1,4,8,16,24,36,54,81,121")
    lad.add_argument("--concurrent-coarse", default="1,32,64,128,192,288,432,648,972")
    lad.add_argument("--step", type=float, default=0.045, help="refined rungs' relative spacing")
    lad.add_argument("--keep-below", type=int, default=2, help="coarse passing rungs kept")
    lad.add_argument("--scout-hold-s", type=float, default=7.0)
    lad.add_argument("--scout-measure-s", type=float, default=5.0)
    lad.add_argument("--hold-s", type=float, default=12.0)
    lad.add_argument("--measure-s", type=float, default=8.0)
    lad.add_argument("--idle-s", type=float, default=1.0)
    lad.add_argument("--slo-ms", type=float, default=3000.0)
    lad.add_argument(
        "--underrun-slo", type=float, default=None,
        help="a rung whose share of stalled streams exceeds this fails too (e.g. 0.05)",
    )  # fmt: skip
    lad.add_argument("--processes", type=int, default=8)
    lad.add_argument("--max-batch", type=int, default=64)
    lad.add_argument("--mega-cache", type=Path, required=True)
    lad.add_argument(
        "--cache-root", type=Path, default=Path(tempfile.gettempdir()) / "gpu-bench-caches"
    )
    lad.add_argument("--server-logs", action="store_true")
    lad.add_argument("--dtype", default="", help="ENGINE_DTYPE for the servers (default: theirs)")
    lad.add_argument(
        "--server-env", type=lambda s: s.split(","), default=[],
        help="more server environment, KEY=VALUE,KEY=VALUE (e.g. ENGINE_PROCESS=0)",
    )  # fmt: skip
    lad.add_argument("--label", default="", help="prefix of this call's log and ready files")
    lad.add_argument(
        "--server-root", type=Path, default=None,
        help="a tree whose container/ the servers run (default: this one), e.g. main's code",
    )  # fmt: skip
    lad.add_argument(
        "--fine-below", type=float, default=0.1,
        help="fine rungs start this far (relative) below the scout's last pass",
    )  # fmt: skip
    lad.add_argument(
        "--max-fine-rungs", type=int, default=16,
        help="a wider bracket is first narrowed by another scout, so the final ladder fits a call",
    )  # fmt: skip
    lad.add_argument("--narrowing-rungs", type=int, default=5, help="rungs of each such scout")
    lad.add_argument(
        "--overshoot", type=float, default=0.25,
        help="fine rungs go this far (relative) past the scout's first fail",
    )  # fmt: skip
    lad.set_defaults(handler=device_ladders)

    srv = sub.add_parser("served", help="served audio-s/s from bytes, stalls, both Q_max")
    srv.add_argument("artifacts", type=Path, nargs="+", help="qmax-*.json (samples beside)")
    srv.add_argument("--underrun-slo", type=float, default=0.05)
    srv.add_argument("--mean-audio-s", type=float, default=4.69, help="corpus mean, derived")
    srv.add_argument("--out", type=Path, default=None, help="JSON lines to write")
    srv.set_defaults(handler=served)

    summ = sub.add_parser("summarize", help="gpu-summary-<gpu>.json from a device run's files")
    summ.add_argument("--run", type=Path, required=True, help="offline-*.json and ready.json")
    summ.add_argument("--artifacts", type=Path, required=True, help="the run's qmax artifacts")
    summ.add_argument(
        "--serial", type=Path, default=None, help="this serial artifact (with --batched)"
    )
    summ.add_argument("--batched", type=Path, default=None, help="this batched artifact")
    summ.add_argument("--plots", action="store_true", help="also draw each artifact's plot")
    summ.add_argument("--note", action="append", default=[], help="KEY=TEXT, into the notes")
    summ.add_argument(
        "--design", default="", help="suffix of this design's start-up keys in ready.json"
    )
    summ.add_argument("--out", type=Path, required=True)
    summ.add_argument("--weights", default="real-int8-converted")
    summ.add_argument("--gpu-label", default="h200")
    summ.add_argument("--g2p-cpu", type=Path, default=None)
    summ.add_argument("--command", required=True, help="the device commands, for the record")
    summ.set_defaults(handler=summarize)
    args = parser.parse_args()
    if hasattr(args, "coarse_rungs") is False and hasattr(args, "serial_coarse"):
        args.coarse_rungs = {"serial": args.serial_coarse, "concurrent": args.concurrent_coarse}
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
