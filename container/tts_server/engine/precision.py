"""Mixed precision: the synthesis half in float16 or bfloat16 with chosen layer groups in float32.

Run 6 measured whole-pass float16 autocast 1.39x faster than float32 at batch 64, but 0.67 dB
off float32's log-mel spectrum (the bound is 0.5). AdaIN's statistics, the harmonic source and
the iSTFT already run in float32; what is left in half precision are the convolutions and the
style projections. `keep_float32` pins the convolutions and linear layers of named groups of
the decoder to float32 (inputs cast up, autocast off inside), so a probe can find which groups
carry the error and the engine can run the rest in half precision (`$ENGINE_FP32_GROUPS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FP32_GROUPS_ENV = "ENGINE_FP32_GROUPS"  # comma list of GROUPS kept in float32 below float32

# Layer groups of KModel's synthesis half, by module path, in the order a pass runs them.
GROUPS: dict[str, tuple[str, ...]] = {
    "f0n": ("predictor.F0", "predictor.N", "predictor.F0_proj", "predictor.N_proj"),
    "decode": (
        "decoder.F0_conv", "decoder.N_conv", "decoder.asr_res", "decoder.encode", "decoder.decode",
    ),
    "source": ("decoder.generator.noise_convs", "decoder.generator.noise_res"),
    "ups": ("decoder.generator.ups",),
    "resblocks": ("decoder.generator.resblocks",),
    "post": ("decoder.generator.conv_post",),
}  # fmt: skip


def parse_groups(text: str) -> tuple[str, ...]:
    """Group names from a comma list; ValueError naming the known ones for any other."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        raise ValueError(f"unknown groups {unknown}; use any of {', '.join(GROUPS)}")
    return names


def _float32_forward(forward: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def run(x: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.autocast(x.device.type, enabled=False):
            return forward(x.float(), *args, **kwargs)

    run.pinned_float32 = True  # type: ignore[attr-defined]
    return run


def keep_float32(model: Any, groups: tuple[str, ...]) -> int:
    """Pin every convolution and linear layer under `groups` to float32 (in place: the
    instances' `forward` wraps the class's); how many layers this call pinned (a layer
    already pinned is left as it is)."""
    import torch

    leaves = (torch.nn.Conv1d, torch.nn.ConvTranspose1d, torch.nn.Linear)
    pinned = 0
    modules = dict(model.named_modules())
    for group in groups:
        for path in GROUPS[group]:
            root = modules.get(path)
            if root is None:
                continue
            for leaf in root.modules():
                if isinstance(leaf, leaves) and "forward" not in vars(leaf):
                    leaf.forward = _float32_forward(leaf.forward)
                    pinned += 1
    return pinned


def release_float32(model: Any) -> int:
    """Undo `keep_float32`: every pinned layer back to its class's forward; how many."""
    released = 0
    for module in model.modules():
        if getattr(vars(module).get("forward"), "pinned_float32", False):
            del module.forward
            released += 1
    return released
