"""The fused pieces of the torch backend, on small tensors (no model): the padding masks, the
AdaIN chain with and without them, and weight-norm folding."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tts_server.engine.base import EngineError
from tts_server.engine.masked_decoder import adain_act, fold_weight_norm, padding_mask
from tts_server.engine.torch_backend import planned_settings


@settings(max_examples=50, deadline=None)
@given(
    frames=st.lists(st.integers(1, 400), min_size=1, max_size=6),
    scale=st.sampled_from([1, 2, 20]),
    extra=st.sampled_from([0, 1]),
)
def test_each_item_holds_its_share_of_any_resolution(frames: list[int], scale: int, extra: int):
    total = max(frames)
    length = total * scale + extra  # the resolutions a pass meets: T, 2T, 20T, 120T + 1
    share = torch.tensor(frames, dtype=torch.float32) / total
    mask = padding_mask(share, torch.zeros(len(frames), 3, length))
    assert mask.shape == (len(frames), 1, length)
    held = mask.sum(-1).squeeze(1).long().tolist()
    for n, count in zip(frames, held, strict=True):
        assert count == max(1, min(length, round(n / total * length)))
        if extra == 0:
            assert count == n * scale  # whole multiples of the frame axis are exact
    assert held[frames.index(total)] == length


def _chain_inputs(batch: int, channels: int, length: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(batch * 100 + length)
    return {
        "x": torch.randn(batch, channels, length, generator=generator),
        "h": torch.randn(batch, 2 * channels, generator=generator) * 0.1,
        "norm_weight": 1 + torch.randn(channels, generator=generator) * 0.1,
        "norm_bias": torch.randn(channels, generator=generator) * 0.1,
    }


@pytest.mark.parametrize("alpha", [None, "snake"])
def test_a_full_length_mask_changes_nothing(alpha: str | None) -> None:
    inputs = _chain_inputs(2, 8, 50)
    a = None if alpha is None else torch.rand(1, 8, 1) + 0.5
    plain = adain_act(**inputs, eps=1e-5, alpha=a, slope=0.2, share=None)
    masked = adain_act(**inputs, eps=1e-5, alpha=a, slope=0.2, share=torch.ones(2))
    torch.testing.assert_close(masked, plain, rtol=1e-5, atol=1e-5)


def test_a_padded_item_is_normalised_over_its_own_frames_and_zeroed_past_them() -> None:
    inputs = _chain_inputs(1, 4, 30)
    alone = adain_act(**inputs, eps=1e-5, alpha=None, slope=0.2, share=None)
    padded_x = torch.cat([inputs["x"], torch.randn(1, 4, 20) * 50], dim=-1)  # loud padding
    padded = adain_act(
        **{**inputs, "x": padded_x}, eps=1e-5, alpha=None, slope=0.2, share=torch.tensor([0.6])
    )
    torch.testing.assert_close(padded[..., :30], alone, rtol=1e-4, atol=1e-5)
    assert torch.count_nonzero(padded[..., 30:]) == 0


def test_the_chain_keeps_the_input_dtype_and_computes_in_float32() -> None:
    inputs = _chain_inputs(2, 8, 40)
    bf16 = {**inputs, "x": inputs["x"].bfloat16(), "h": inputs["h"].bfloat16()}
    out = adain_act(**bf16, eps=1e-5, alpha=None, slope=0.2, share=torch.tensor([1.0, 0.5]))
    assert out.dtype == torch.bfloat16
    ref = adain_act(
        **{**inputs, "x": bf16["x"].float(), "h": bf16["h"].float()},
        eps=1e-5, alpha=None, slope=0.2, share=torch.tensor([1.0, 0.5]),
    )  # fmt: skip
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-2)


def test_folding_weight_norm_keeps_each_convolution_and_removes_the_recomputation() -> None:
    from torch.nn.utils import weight_norm

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        weight_norm(torch.nn.Conv1d(3, 5, 3, padding=1)), torch.nn.Conv1d(5, 2, 1)
    )
    x = torch.randn(2, 3, 16)
    before = model(x)
    assert fold_weight_norm(model) == 1
    assert not any(hasattr(m, "weight_g") for m in model.modules())
    torch.testing.assert_close(model(x), before)


def test_settings_default_to_compiled_mixed_float16_on_a_gpu_and_eager_float32_on_a_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ENGINE_DTYPE", "ENGINE_COMPILE", "ENGINE_FP32_GROUPS"):
        monkeypatch.delenv(name, raising=False)
    gpu, cpu = planned_settings("cuda", 64), planned_settings("cpu", 1)
    # run 9: float16 with the F0/N head and the output convolution in float32 keeps every
    # parity bound and serves more than float32 on the H200
    assert (gpu["TORCH_DTYPE"], gpu["TORCH_COMPILE"], gpu["TORCH_FP32_GROUPS"]) == (
        "float16", "1", "f0n,post",
    )  # fmt: skip
    assert (cpu["TORCH_DTYPE"], cpu["TORCH_COMPILE"]) == ("float32", "0")
    assert "TORCH_FP32_GROUPS" not in cpu
    monkeypatch.setenv("ENGINE_DTYPE", "float32")  # the reference pass, one setting away
    assert "TORCH_FP32_GROUPS" not in planned_settings("cuda", 64)
    monkeypatch.setenv("ENGINE_DTYPE", "float16")
    monkeypatch.setenv("ENGINE_FP32_GROUPS", "none")  # whole-pass float16, as run 6 measured it
    assert "TORCH_FP32_GROUPS" not in planned_settings("cuda", 64)
    monkeypatch.setenv("ENGINE_DTYPE", "float8")
    match = "ENGINE_DTYPE='float8'; use one of float32, bfloat16, float16"
    with pytest.raises(EngineError, match=match):
        planned_settings("cuda", 64)
