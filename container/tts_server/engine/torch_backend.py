"""Kokoro-82M on PyTorch (hexgrad's `KModel`): the GPU path, batching concurrent segments.

The weights come from a model directory in the Hugging Face layout (`config.json`, one
`*.pth` state dict, `voices/*.pt`), the layout SageMaker mounts at /opt/ml/model; the hub is
never asked. `KModel.forward_with_tokens` takes one sequence, so `forward_batch` re-runs its
steps over a padded batch with masks and packed LSTMs, which is where a GPU earns its keep.

The generator's noise (random initial phase and additive Gaussian noise in the harmonic
source) is off, as it is in the int8 ONNX export: synthesis is deterministic and the two
backends can be compared sample by sample.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tts_server.engine.backend import (
    SAMPLES_PER_FRAME,
    Backend,
    InferenceItem,
    InferenceOutput,
)
from tts_server.engine.base import EngineError
from tts_server.engine.onnx_backend import usable_cores

MAX_BATCH_ENV = "ENGINE_MAX_BATCH"
REPO_ID = "hexgrad/Kokoro-82M"  # only a label for KModel; with config + model it never downloads


@dataclass(frozen=True, slots=True)
class ModelDir:
    """The files of a Hugging Face layout model directory, checked to exist."""

    config: Path
    weights: Path
    voices: dict[str, Path]

    @classmethod
    def find(cls, root: Path) -> ModelDir:
        config = root / "config.json"
        if not config.is_file():
            raise EngineError(f"{root} has no config.json; expected the Hugging Face layout")
        preferred = root / "kokoro-v1_0.pth"
        candidates = [preferred] if preferred.is_file() else sorted(root.glob("*.pth"))
        if len(candidates) != 1:
            raise EngineError(
                f"{root} must hold exactly one *.pth state dict (found {len(candidates)}); "
                "make one with `tts-bench weights import-onnx --out DIR`"
            )
        voices = {p.stem: p for p in sorted((root / "voices").glob("*.pt"))}
        if not voices:
            raise EngineError(f"{root}/voices holds no *.pt voice; copy at least one voice there")
        return cls(config=config, weights=candidates[0], voices=voices)

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for path in [self.config, self.weights, *self.voices.values()]:
            digest.update(path.name.encode())
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        return digest.hexdigest()


class _NoiselessTorch(ModuleType):
    """`torch` as kokoro.istftnet sees it, with its two noise sources returning zeros."""

    def __init__(self, torch: Any) -> None:
        super().__init__("torch")
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def rand(self, *size: Any, **kwargs: Any) -> Any:
        return self._torch.zeros(*size, **kwargs)

    def randn_like(self, tensor: Any, **kwargs: Any) -> Any:
        return self._torch.zeros_like(tensor, **kwargs)


# Per batch item, the share of the padded time axis that is real (1.0 for the longest).
_VALID_SHARE: contextvars.ContextVar[Any] = contextvars.ContextVar("kokoro_valid_share")


def _padding_mask(x: Any) -> Any:
    """(B, 1, L) with 1 on each item's real part of x's time axis; None outside a batch."""
    import torch

    share = _VALID_SHARE.get(None)
    if share is None:
        return None
    length = x.shape[-1]
    valid = torch.clamp(torch.round(share * length).long(), 1, length)
    mask = torch.arange(length, device=x.device)[None, :] < valid[:, None]
    return mask.to(x.dtype)[:, None, :]


def _zero_padding(module: Any, inputs: tuple[Any, ...]) -> Any:
    """Forward pre-hook for convolutions on the frame axis: zeros past each item's end."""
    mask = _padding_mask(inputs[0])
    return None if mask is None else (inputs[0] * mask, *inputs[1:])


def _masked_adain(self: Any, x: Any, s: Any) -> Any:
    """AdaIN1d whose instance statistics ignore a padded batch item's padding.

    Without this, a short item batched with a long one is normalised over the long one's
    length, and its convolutions read the padding, so it sounds different from the same
    item alone. (The convolutions' inputs are zeroed past each item's end by `_zero_padding`.)
    """
    import torch

    h = self.fc(s)
    gamma, beta = torch.chunk(h.view(h.size(0), h.size(1), 1), chunks=2, dim=1)
    mask = _padding_mask(x)
    if mask is None:
        return (1 + gamma) * self.norm(x) + beta
    count = mask.sum(-1, keepdim=True)
    mean = (x * mask).sum(-1, keepdim=True) / count
    var = (((x - mean) * mask) ** 2).sum(-1, keepdim=True) / count
    normed = (x - mean) / torch.sqrt(var + self.norm.eps)
    if self.norm.affine:
        normed = normed * self.norm.weight[None, :, None] + self.norm.bias[None, :, None]
    return (1 + gamma) * normed + beta


def kokoro_module(name: str) -> ModuleType:
    """`kokoro.<name>` (model, istftnet), also where kokoro's text front end is not installed.

    `import kokoro` also imports its pipeline, which needs misaki, spaCy and espeak; the model
    modules need none of them. Where that import fails (the lent GPU machine cannot install
    the front end), the package is registered without running its `__init__`.
    """
    import importlib
    import importlib.util
    import sys

    try:
        importlib.import_module("kokoro")
    except ImportError as exc:
        spec = importlib.util.find_spec("kokoro")
        if spec is None or spec.submodule_search_locations is None:
            raise EngineError("the torch backend needs the `kokoro` package") from exc
        package = ModuleType("kokoro")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["kokoro"] = package
    return importlib.import_module(f"kokoro.{name}")


def silence_generator_noise() -> None:
    """Patch kokoro.istftnet once: no generator noise, padding-aware instance norm."""
    import torch

    istftnet = kokoro_module("istftnet")

    if not isinstance(istftnet.torch, _NoiselessTorch):
        istftnet.torch = _NoiselessTorch(torch)
        istftnet.AdaIN1d.forward = _masked_adain


def load_voice_packs(voices: dict[str, Path]) -> dict[str, np.ndarray]:
    import torch

    packs = {}
    for name, path in voices.items():
        pack = torch.load(path, map_location="cpu", weights_only=True).float().numpy()
        packs[name] = pack.reshape(-1, 1, 256)
    return packs


def build_kmodel(config: dict[str, Any], weights: Path) -> Any:
    """A `KModel` from a config dict and a state dict file: both given, so nothing downloads."""
    import torch

    KModel = kokoro_module("model").KModel
    silence_generator_noise()
    model = KModel(repo_id=REPO_ID, config=config, model=str(weights)).eval()
    # In a padded batch every convolution after the text encoders must see zeros past an
    # item's end, as it would alone; outside `forward_batch`'s batches the hook does nothing.
    for part in (model.predictor, model.decoder):
        for module in part.modules():
            if isinstance(module, torch.nn.Conv1d | torch.nn.ConvTranspose1d):
                module.register_forward_pre_hook(_zero_padding)
    return model


def forward_batch(
    model: Any,
    items: Sequence[InferenceItem],
    forced_durations: Sequence[np.ndarray] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """KModel's forward over a padded batch: per item audio, durations and F0 curve.

    `forced_durations` (frames per token, boundary tokens included) replaces the duration
    predictor's output, to compare the rest of the network against another backend.
    """
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    device = model.device
    lengths = torch.tensor([len(it.token_ids) + 2 for it in items], dtype=torch.long)
    width = int(lengths.max())
    ids = torch.zeros((len(items), width), dtype=torch.long)
    for row, it in enumerate(items):
        ids[row, 1 : len(it.token_ids) + 1] = torch.from_numpy(it.token_ids)
    ids = ids.to(device)
    styles = torch.from_numpy(np.stack([it.style.reshape(256) for it in items])).to(device)
    speeds = torch.tensor([it.speed for it in items], dtype=torch.float32, device=device)
    padding = (torch.arange(width)[None, :] >= lengths[:, None]).to(device)
    prosody_style = styles[:, 128:]

    with torch.inference_mode():
        bert = model.bert(ids, attention_mask=(~padding).int())
        d_en = model.bert_encoder(bert).transpose(-1, -2)
        d = model.predictor.text_encoder(d_en, prosody_style, lengths, padding)
        packed = pack_padded_sequence(d, lengths, batch_first=True, enforce_sorted=False)
        x, _ = model.predictor.lstm(packed)
        x, _ = pad_packed_sequence(x, batch_first=True, total_length=width)
        duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1) / speeds[:, None]
        if forced_durations is None:
            frames_per_token = torch.round(duration).clamp(min=1).long()
        else:
            frames_per_token = torch.zeros((len(items), width), dtype=torch.long, device=device)
            for row, forced in enumerate(forced_durations):
                frames_per_token[row, : len(forced)] = torch.from_numpy(forced).to(device)
        frames_per_token = frames_per_token.masked_fill(padding, 0)
        frames = frames_per_token.sum(dim=1)
        total = int(frames.max())
        alignment = torch.zeros((len(items), width, total), device=device)
        for row in range(len(items)):
            token_of_frame = torch.repeat_interleave(
                torch.arange(width, device=device), frames_per_token[row]
            )
            alignment[row, token_of_frame, torch.arange(len(token_of_frame), device=device)] = 1
        en = d.transpose(-1, -2) @ alignment
        text = model.text_encoder(ids, lengths, padding)  # token axis: masks itself
        token = _VALID_SHARE.set(frames.to(torch.float32) / total if len(items) > 1 else None)
        try:
            packed = pack_padded_sequence(
                en.transpose(-1, -2), frames.cpu(), batch_first=True, enforce_sorted=False
            )
            shared, _ = model.predictor.shared(packed)
            shared, _ = pad_packed_sequence(shared, batch_first=True, total_length=total)
            f0 = n = shared.transpose(-1, -2)
            for block in model.predictor.F0:
                f0 = block(f0, prosody_style)
            f0 = model.predictor.F0_proj(f0).squeeze(1)
            for block in model.predictor.N:
                n = block(n, prosody_style)
            n = model.predictor.N_proj(n).squeeze(1)
            if len(items) > 1:
                curve_mask = torch.arange(2 * total, device=device)[None, :] < 2 * frames[:, None]
                f0, n = f0 * curve_mask, n * curve_mask
            audio = model.decoder(text @ alignment, f0, n, styles[:, :128]).reshape(len(items), -1)
        finally:
            _VALID_SHARE.reset(token)

    audio_np = audio.float().cpu().numpy()
    f0_np = f0.float().cpu().numpy()
    durations_np = frames_per_token.cpu().numpy()
    out_audio, out_durations, out_f0 = [], [], []
    for row, it in enumerate(items):
        count = int(frames[row])
        out_audio.append(audio_np[row, : count * SAMPLES_PER_FRAME].astype(np.float32))
        out_durations.append(durations_np[row, : len(it.token_ids) + 2].astype(np.int64))
        out_f0.append(f0_np[row, : 2 * count])
    return out_audio, out_durations, out_f0


def planned_device() -> str:
    """`cuda` when an NVIDIA device node exists (checked without importing torch), else `cpu`."""
    return "cuda" if Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists() else "cpu"


class TorchBackend(Backend):
    """`KModel` on the GPU when there is one (else CPU), batching up to `max_batch` segments."""

    name = "torch"
    slots = 1

    def __init__(self, model_dir: Path, device: str | None = None, max_batch: int | None = None):
        import torch

        self.files = ModelDir.find(model_dir)
        self.device = device or planned_device()
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineError(
                f"device {self.device} requested but torch sees no CUDA GPU; use --device cpu"
            )
        if self.device == "cpu":
            torch.set_num_threads(usable_cores())
        self.max_batch = max_batch or self.default_max_batch(self.device)
        config = json.loads(self.files.config.read_text(encoding="utf-8"))
        try:
            self.model = build_kmodel(config, self.files.weights).to(self.device)
        except (RuntimeError, KeyError, OSError) as exc:
            raise EngineError(f"cannot build KModel from {model_dir}: {exc}") from exc
        self.vocab: dict[str, int] = config["vocab"]
        self.voices = load_voice_packs(self.files.voices)

    @staticmethod
    def default_max_batch(device: str) -> int:
        """`$ENGINE_MAX_BATCH` if set; else 64 on a GPU and 1 (no batching) on a CPU.

        A GPU pass costs about the same for 1 or 64 segments (SPEC §10). On a CPU a padded
        batch only adds work: measured here, batches of up to 4 gave 0.80-0.88x the
        throughput of one segment at a time (measurements/engine-bench.md).
        """
        configured = os.environ.get(MAX_BATCH_ENV)
        if configured:
            try:
                value = int(configured)
            except ValueError:
                value = 0
            if value < 1:
                raise EngineError(f"{MAX_BATCH_ENV}={configured!r}; set a whole number >= 1")
            return value
        return 64 if device.startswith("cuda") else 1

    @property
    def settings(self) -> dict[str, str]:
        return {"TORCH_DEVICE": self.device, "ENGINE_MAX_BATCH": str(self.max_batch)}

    def infer(self, items: Sequence[InferenceItem]) -> list[InferenceOutput]:
        audio, durations, _ = forward_batch(self.model, items)
        return [
            InferenceOutput(audio=a, durations=d) for a, d in zip(audio, durations, strict=True)
        ]

    def close(self) -> None:
        self.model = None
