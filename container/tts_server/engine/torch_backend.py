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

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
from tts_server.engine.precision import FP32_GROUPS_ENV, parse_groups

MAX_BATCH_ENV = "ENGINE_MAX_BATCH"
DTYPE_ENV = "ENGINE_DTYPE"  # float32 | bfloat16 | float16: the synthesis half's arithmetic
COMPILE_ENV = "ENGINE_COMPILE"  # 1: torch.compile the synthesis half; 0: eager
GRAPHS_ENV = "ENGINE_CUDA_GRAPHS"  # 0: off; N: CUDA graphs for the synthesis half of batches <= N
# The GPU's default pass (run 9): float16 autocast, the F0/N head and the output convolution in
# float32, where half precision's spectrum error comes from (run 7's layer-by-layer probe).
GPU_DTYPE, GPU_FP32_GROUPS = "float16", "f0n,post"
TEXT_GRAPHS_ENV = "ENGINE_TEXT_GRAPHS"  # 1: the text half of those batches graphed too
DTYPES = ("float32", "bfloat16", "float16")
WARM_GRAPH_FRAMES = 512  # warm() captures graphs of buckets up to 12.8 s of audio
WARM_TEXT_TOKENS = 256  # and text-half graphs of buckets up to 256 token ids
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


def load_voice_packs(voices: dict[str, Path]) -> dict[str, np.ndarray]:
    import torch

    packs = {}
    for name, path in voices.items():
        pack = torch.load(path, map_location="cpu", weights_only=True).float().numpy()
        packs[name] = pack.reshape(-1, 1, 256)
    return packs


def build_kmodel(config: dict[str, Any], weights: Path) -> Any:
    """A `KModel` from a config dict and a state dict file: both given, so nothing downloads.

    The model is kokoro's own, weight norm and all (its state dict is the import's reference);
    `prepare_for_inference` makes it fast.
    """
    KModel = kokoro_module("model").KModel
    return KModel(repo_id=REPO_ID, config=config, model=str(weights)).eval()


def prepare_for_inference(model: Any, device: str) -> Any:
    """Weight norm folded once, the model on `device`, the STFT window kept there too."""
    from tts_server.engine.masked_decoder import fold_weight_norm

    fold_weight_norm(model)
    model = model.to(device)
    stft = model.decoder.generator.stft
    if hasattr(stft, "window"):  # TorchSTFT copies a CPU window to the device on every call
        stft.window = stft.window.to(device)
    return model


@dataclass(frozen=True, slots=True)
class PassOptions:
    """How `forward_batch` runs the synthesis half of the pass (the text half is always fp32)."""

    dtype: str = "float32"  # one of DTYPES (autocast below fp32; the harmonic source stays fp32)
    chain: Callable[..., Any] | None = None  # masked_decoder.adain_act, or it compiled
    graphs: Any | None = None  # a cuda_graphs.GraphedSynthesis, for the batches it fits
    text: Any | None = None  # static_text.StaticText or cuda_graphs.GraphedText: no packing


def _to_host(tensors: Sequence[Any]) -> list[np.ndarray]:
    """Device tensors to numpy: async copies into pinned memory, one wait for them all."""
    import torch

    if not tensors or tensors[0].device.type != "cuda":
        return [t.numpy() for t in tensors]
    hosts = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
    for host, t in zip(hosts, tensors, strict=True):
        host.copy_(t, non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return [h.numpy() for h in hosts]


def _batch_inputs(items: Sequence[InferenceItem], device: Any) -> tuple[Any, ...]:
    """The batch's token ids (boundary tokens around each item, zero-padded), their lengths
    (on the host), styles, speeds and the padding mask, on `device`."""
    import torch

    lengths = torch.tensor([len(it.token_ids) + 2 for it in items], dtype=torch.long)
    width = int(lengths.max())
    ids = torch.zeros((len(items), width), dtype=torch.long)
    for row, it in enumerate(items):
        ids[row, 1 : len(it.token_ids) + 1] = torch.from_numpy(it.token_ids)
    styles_host = torch.from_numpy(np.stack([it.style.reshape(256) for it in items]))
    speeds_host = torch.tensor([it.speed for it in items], dtype=torch.float32)
    ids, styles, speeds = (t.to(device, non_blocking=True) for t in (ids, styles_host, speeds_host))
    padding = (torch.arange(width)[None, :] >= lengths[:, None]).to(device)
    return ids, lengths, styles, speeds, padding


def forward_batch(
    model: Any,
    items: Sequence[InferenceItem],
    forced_durations: Sequence[np.ndarray] | None = None,
    options: PassOptions | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """KModel's forward over a padded batch: per item audio, durations and F0 curve.

    The text half (ALBERT, duration predictor, text encoder) runs in float32, so durations do
    not depend on `options.dtype`. `forced_durations` (frames per token, boundary tokens
    included) replaces the duration predictor's output, to compare the rest of the network
    against another backend. `model` must have been through `prepare_for_inference`.
    """
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from tts_server.engine import masked_decoder

    options = options or PassOptions()
    device = model.device
    batch = len(items)
    ids, lengths, styles, speeds, padding = _batch_inputs(items, device)
    width = int(lengths.max())

    with torch.inference_mode():
        d, duration, text = _text_half(model, ids, lengths, styles, speeds, padding, options)
        if forced_durations is None:
            frames_per_token = torch.round(duration).clamp(min=1).long()
        else:
            forced = torch.zeros((batch, width), dtype=torch.long)
            for row, durations in enumerate(forced_durations):
                forced[row, : len(durations)] = torch.from_numpy(durations)
            frames_per_token = forced.to(device)
        frames_per_token = frames_per_token.masked_fill(padding, 0)
        frames = frames_per_token.sum(dim=1)
        frames_host = frames.cpu()  # the pass's one wait before synthesis: shapes depend on it
        total = int(frames_host.max())
        # Each frame's token (the alignment matrix's one 1 per column) as a gather index.
        ends = frames_per_token.cumsum(dim=1)
        frame_axis = torch.arange(total, device=device).expand(batch, total).contiguous()
        token_of_frame = torch.searchsorted(ends, frame_axis, right=True).clamp(max=width - 1)
        real = (frame_axis < frames[:, None]).to(d.dtype)[:, None, :]

        def aligned(per_token: Any) -> Any:  # (B, C, width) -> (B, C, total), zero past the end
            index = token_of_frame[:, None, :].expand(-1, per_token.shape[1], -1)
            return torch.gather(per_token, 2, index) * real

        en = aligned(d.transpose(-1, -2))
        packed = pack_padded_sequence(
            en.transpose(-1, -2), frames_host, batch_first=True, enforce_sorted=False
        )
        shared, _ = model.predictor.shared(packed)
        shared, _ = pad_packed_sequence(shared, batch_first=True, total_length=total)
        spectrum, f0 = _spectrum(model, shared, aligned(text), styles, frames, options)
        audio = masked_decoder.istft_tail(model.decoder.generator, spectrum)
        audio = audio.reshape(batch, -1).float()
        audio_np, f0_np, durations_np = _to_host([audio, f0, frames_per_token])

    out_audio, out_durations, out_f0 = [], [], []
    for row, it in enumerate(items):
        count = int(frames_host[row])
        out_audio.append(audio_np[row, : count * SAMPLES_PER_FRAME].astype(np.float32))
        out_durations.append(durations_np[row, : len(it.token_ids) + 2].astype(np.int64))
        out_f0.append(f0_np[row, : 2 * count].copy())
    return out_audio, out_durations, out_f0


def _text_half(
    model: Any,
    ids: Any,
    lengths: Any,
    styles: Any,
    speeds: Any,
    padding: Any,
    options: PassOptions,
) -> tuple[Any, Any, Any]:
    """ALBERT, the duration encoder and head, and the text encoder: d (B, W, C), unrounded
    durations (B, W) and the text encoder's output (B, C', W). From `options.text` (padded
    to a bucket, no packing; graphed on a GPU) when the batch fits it, else kokoro's modules
    with packed LSTMs (`lengths` on the host)."""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    batch, width = ids.shape
    if options.text is not None and options.text.fits(batch, width):
        lengths_device = lengths.to(ids.device, non_blocking=True)
        return options.text.run(ids, lengths_device, styles, speeds)
    bert = model.bert(ids, attention_mask=(~padding).int())
    d_en = model.bert_encoder(bert).transpose(-1, -2)
    d = model.predictor.text_encoder(d_en, styles[:, 128:], lengths, padding)
    packed = pack_padded_sequence(d, lengths, batch_first=True, enforce_sorted=False)
    x, _ = model.predictor.lstm(packed)
    x, _ = pad_packed_sequence(x, batch_first=True, total_length=width)
    duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1) / speeds[:, None]
    return d, duration, model.text_encoder(ids, lengths, padding)  # token axis: masks itself


def _spectrum(
    model: Any, shared: Any, asr: Any, styles: Any, frames: Any, options: PassOptions
) -> tuple[Any, Any]:
    """The synthesis half up to the iSTFT: replayed from the captured graphs when the batch
    fits them, else run eagerly (under autocast when the pass runs in half precision)."""
    import torch

    from tts_server.engine import masked_decoder

    batch, total = shared.shape[0], shared.shape[1]
    if options.graphs is not None and options.graphs.fits(batch, total):
        return options.graphs.spectrum(shared, asr, styles, frames)
    device = shared.device
    low = options.dtype != "float32"
    with torch.autocast(device.type, dtype=getattr(torch, options.dtype), enabled=low):
        return masked_decoder.synthesize_spectrum(
            model, shared, asr, styles, frames if batch > 1 else None, options.chain
        )


def planned_device() -> str:
    """`cuda` when an NVIDIA device node exists (checked without importing torch), else `cpu`."""
    return "cuda" if Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists() else "cpu"


def _env_choice(name: str, allowed: tuple[str, ...], default: str) -> str:
    value = os.environ.get(name) or default
    if value not in allowed:
        raise EngineError(f"{name}={value!r}; use one of {', '.join(allowed)}")
    return value


def planned_settings(device: str, max_batch: int) -> dict[str, str]:
    """The settings that change this backend's speed, known before loading (fingerprint).

    On a GPU the AdaIN chains run compiled (`torch.compile`, dynamic shapes) under float16
    autocast, with the layer groups `GPU_FP32_GROUPS` kept in float32: that keeps every parity
    bound (log-mel 0.187 dB, r 0.9997, F0 r 1.0000, padded-vs-alone 0.99949) and served three
    batched ladders on one H200 at Q_max 664, 664 and >= 564, against float32's 609, 529 and 628
    in the same lease (measurements/lab/h200-run9/NOTES.md). On a CPU: float32, eager.
    `$ENGINE_DTYPE` and `$ENGINE_COMPILE` override. `$ENGINE_FP32_GROUPS` (below float32 only)
    names the groups of `precision.GROUPS` kept in float32; `none` keeps none.
    `$ENGINE_CUDA_GRAPHS=N` (off by default; a GPU only) replays the synthesis half of batches
    of up to N from CUDA graphs (`cuda_graphs`); the key is in the settings only when it is on,
    so artifacts of builds without it keep their fingerprints; `$ENGINE_TEXT_GRAPHS=1` graphs
    the text half of the same batches too (`static_text`), likewise keyed only when on.
    """
    gpu = device.startswith("cuda")
    settings = {
        "TORCH_DEVICE": device,
        "ENGINE_MAX_BATCH": str(max_batch),
        "TORCH_DTYPE": _env_choice(DTYPE_ENV, DTYPES, GPU_DTYPE if gpu else "float32"),
        "TORCH_COMPILE": _env_choice(COMPILE_ENV, ("0", "1"), "1" if gpu else "0"),
    }
    graphs = os.environ.get(GRAPHS_ENV) or "0"
    if not graphs.isdigit() or int(graphs) > max_batch:
        raise EngineError(f"{GRAPHS_ENV}={graphs!r}; use a whole number from 0 to {max_batch}")
    groups = os.environ.get(FP32_GROUPS_ENV) or (GPU_FP32_GROUPS if gpu else "")
    if groups and groups != "none":
        try:
            names = parse_groups(groups)
        except ValueError as exc:
            raise EngineError(f"{FP32_GROUPS_ENV}={groups!r}: {exc}") from exc
        if names and settings["TORCH_DTYPE"] != "float32":
            settings["TORCH_FP32_GROUPS"] = ",".join(names)
    if int(graphs) > 0:
        if not gpu:
            raise EngineError(f"{GRAPHS_ENV}={graphs} needs a CUDA device; unset it on a CPU")
        settings["TORCH_CUDA_GRAPHS"] = str(int(graphs))
    text_graphs = _env_choice(TEXT_GRAPHS_ENV, ("0", "1"), "0")
    if text_graphs == "1":
        if int(graphs) == 0:
            raise EngineError(f"{TEXT_GRAPHS_ENV}=1 needs {GRAPHS_ENV}=N (its batch bound)")
        settings["TORCH_TEXT_GRAPHS"] = "1"
    return settings


def warmup_items(vocab: dict[str, int], style: np.ndarray) -> list[list[InferenceItem]]:
    """Batches that make compilation happen before the server is ready, not on a request.

    A lone item (no masks) and padded batches of two sizes and mixed lengths: with dynamic
    shapes that covers the graphs a server meets (batch 1, any batch above 1, any length).
    """
    token = np.int64(next(i for c, i in sorted(vocab.items()) if c.isalpha()))

    def item(n: int) -> InferenceItem:
        return InferenceItem(np.full(n, token, np.int64), style[n - 1].reshape(256), 1.0)

    return [
        [item(12)],
        [item(40)],
        [item(30), item(8), item(60)],
        [item(20 + 7 * k) for k in range(5)],
    ]


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
        self._settings = planned_settings(self.device, self.max_batch)
        config = json.loads(self.files.config.read_text(encoding="utf-8"))
        try:
            self.model = prepare_for_inference(
                build_kmodel(config, self.files.weights), self.device
            )
        except (RuntimeError, KeyError, OSError) as exc:
            raise EngineError(f"cannot build KModel from {model_dir}: {exc}") from exc
        self.vocab: dict[str, int] = config["vocab"]
        self.voices = load_voice_packs(self.files.voices)
        self.options = PassOptions(dtype=self._settings["TORCH_DTYPE"])
        if "TORCH_FP32_GROUPS" in self._settings:
            from tts_server.engine.precision import keep_float32

            keep_float32(self.model, parse_groups(self._settings["TORCH_FP32_GROUPS"]))
        if self._settings["TORCH_COMPILE"] == "1":
            from tts_server.engine.compile_cache import compiled_adain_act

            self.options = replace(self.options, chain=compiled_adain_act())
        if "TORCH_CUDA_GRAPHS" in self._settings:
            self.options = self._graphed(self.options, int(self._settings["TORCH_CUDA_GRAPHS"]))

    def _graphed(self, options: PassOptions, max_batch: int) -> PassOptions:
        from tts_server.engine.cuda_graphs import GraphedSynthesis, GraphedText
        from tts_server.engine.static_text import StaticText

        graphs = GraphedSynthesis(self.model, options.chain, options.dtype, max_batch)
        text = None
        if self._settings.get("TORCH_TEXT_GRAPHS") == "1":
            text = GraphedText(StaticText(self.model), max_batch)
        return replace(options, graphs=graphs, text=text)

    @staticmethod
    def default_max_batch(device: str) -> int:
        """`$ENGINE_MAX_BATCH` if set; else 64 on a GPU and 1 (no batching) on a CPU.

        A GPU pass costs about the same for 1 or 64 segments (SPEC §10). On a CPU a padded
        batch only adds work: measured here, batches of up to 4 gave 0.80-0.88x the
        throughput of one segment at a time (measurements/lab/engine-bench.md).
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
        return dict(self._settings)

    def warm(self) -> float:
        """Run the warm-up batches (compiling, when on), then capture the CUDA graphs of
        every batch size they cover up to `WARM_GRAPH_FRAMES` frames and, when the text half
        is graphed, `WARM_TEXT_TOKENS` token ids (longer ones are captured on first use);
        seconds taken."""
        started = time.perf_counter()
        style = next(iter(self.voices.values()))
        for batch in warmup_items(self.vocab, style):
            if len(batch) <= self.max_batch:
                self.infer(batch)
        graphs = self.options.graphs
        if graphs is not None:
            shared_dim = 2 * self.model.predictor.shared.hidden_size
            asr_dim = 2 * self.model.text_encoder.lstm.hidden_size
            for size in range(1, graphs.max_batch + 1):
                for bucket in range(
                    graphs.bucket_frames, WARM_GRAPH_FRAMES + 1, graphs.bucket_frames
                ):
                    graphs.capture(size, bucket, shared_dim, asr_dim)
        text = self.options.text
        if text is not None:
            step = text.static.bucket_tokens
            for size in range(1, text.max_batch + 1):
                for bucket in range(step, WARM_TEXT_TOKENS + 1, step):
                    text.capture(size, bucket)
        return time.perf_counter() - started

    def infer(self, items: Sequence[InferenceItem]) -> list[InferenceOutput]:
        audio, durations, _ = forward_batch(self.model, items, options=self.options)
        return [
            InferenceOutput(audio=a, durations=d) for a, d in zip(audio, durations, strict=True)
        ]

    def close(self) -> None:
        self.model = None
