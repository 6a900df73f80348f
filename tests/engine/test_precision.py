"""Mixed precision's layer groups and the GPU-only options' settings (no GPU needed)."""

from __future__ import annotations

import pytest
import torch
from tts_server.engine.base import EngineError
from tts_server.engine.precision import GROUPS, keep_float32, parse_groups, release_float32
from tts_server.engine.torch_backend import planned_settings


class _Generator(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_post = torch.nn.Conv1d(4, 4, 3, padding=1)
        self.ups = torch.nn.ModuleList([torch.nn.ConvTranspose1d(4, 4, 2, stride=2)])


class _Decoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.generator = _Generator()


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.decoder = _Decoder()


def test_parse_groups_names_the_known_ones() -> None:
    assert parse_groups(" post, ups ,") == ("post", "ups")
    with pytest.raises(ValueError, match="unknown groups \\['conv'\\]; use any of f0n"):
        parse_groups("post,conv")


def test_keep_float32_pins_only_the_named_groups_and_releases_them() -> None:
    model = _Model()
    x = torch.randn(2, 4, 8)
    before = model.decoder.generator.conv_post(x)
    assert keep_float32(model, ("post",)) == 1
    assert keep_float32(model, ("post",)) == 0  # already pinned: not wrapped twice
    assert "forward" in vars(model.decoder.generator.conv_post)
    assert "forward" not in vars(model.decoder.generator.ups[0])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pinned = model.decoder.generator.conv_post(x.bfloat16())
    assert pinned.dtype == torch.float32  # ran in float32 under autocast
    assert torch.allclose(pinned, before, atol=0.05)  # only the input's rounding differs
    assert release_float32(model) == 1
    assert "forward" not in vars(model.decoder.generator.conv_post)
    assert keep_float32(model, tuple(GROUPS)) == 2  # the groups absent from this model: none


def test_gpu_only_options_stay_out_of_the_default_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ENGINE_CUDA_GRAPHS", raising=False)
    monkeypatch.setenv("ENGINE_DTYPE", "float32")
    monkeypatch.setenv("ENGINE_FP32_GROUPS", "post")
    assert set(planned_settings("cuda", 64)) == {
        "TORCH_DEVICE",
        "ENGINE_MAX_BATCH",
        "TORCH_DTYPE",
        "TORCH_COMPILE",
    }  # fmt: skip  (float32: nothing to keep in float32)
    monkeypatch.setenv("ENGINE_DTYPE", "float16")
    monkeypatch.setenv("ENGINE_CUDA_GRAPHS", "8")
    settings = planned_settings("cuda", 64)
    assert (settings["TORCH_FP32_GROUPS"], settings["TORCH_CUDA_GRAPHS"]) == ("post", "8")


@pytest.mark.parametrize(
    ("value", "device", "message"),
    [
        ("8", "cpu", "needs a CUDA device"),
        ("65", "cuda", "from 0 to 64"),
        ("two", "cuda", "from 0 to 64"),
    ],
)
def test_cuda_graphs_setting_is_checked(
    monkeypatch: pytest.MonkeyPatch, value: str, device: str, message: str
) -> None:
    monkeypatch.setenv("ENGINE_CUDA_GRAPHS", value)
    with pytest.raises(EngineError, match=message):
        planned_settings(device, 64)
