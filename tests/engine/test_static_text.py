"""The text half without packed LSTMs (`static_text`, what `GraphedText` captures on a GPU)
computes what kokoro's packed modules compute, at any padded width."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from tts_server.engine import EngineError
from tts_server.engine.backend import InferenceItem
from tts_server.engine.static_text import StaticText, _Bidirectional, reversal_index
from tts_server.engine.torch_backend import (
    PassOptions,
    build_kmodel,
    forward_batch,
    planned_settings,
    prepare_for_inference,
)


def test_reversal_index_reverses_each_item_within_its_length() -> None:
    index = reversal_index(torch.tensor([3, 5, 1]), 5)
    assert index.tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0], [0, 1, 2, 3, 4]]


def test_unpacked_bidirectional_lstm_equals_the_packed_one() -> None:
    torch.manual_seed(3)
    lstm = torch.nn.LSTM(6, 4, 1, batch_first=True, bidirectional=True).eval()
    lengths = torch.tensor([9, 4, 1, 7])
    width = 12  # wider than any item: a bucket's padding
    x = torch.randn(4, width, 6)
    with torch.no_grad():
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        expected, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=width)
        valid = (torch.arange(width)[None, :] < lengths[:, None]).float()[..., None]
        got = _Bidirectional(lstm)(x, reversal_index(lengths, width), valid)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert not got[1, 4:].any()  # zero past the item, as pad_packed_sequence leaves it


@pytest.fixture(scope="module")
def model(random_model_dir: Path) -> Any:
    config = json.loads((random_model_dir / "config.json").read_text(encoding="utf-8"))
    model = build_kmodel(config, random_model_dir / "kokoro-v1_0.pth")
    # The shared fixture's duration head ignores its input (zero weights); give it some, so
    # the durations compared below depend on everything before them.
    torch.manual_seed(5)
    torch.nn.init.normal_(model.predictor.duration_proj.linear_layer.weight, std=0.1)
    return prepare_for_inference(model, "cpu")


def _items(lengths: tuple[int, ...]) -> list[InferenceItem]:
    rng = np.random.default_rng(sum(lengths))
    return [
        InferenceItem(
            rng.integers(1, 170, n).astype(np.int64),
            rng.normal(0, 0.1, 256).astype(np.float32),
            1.0 + 0.1 * row,
        )
        for row, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("lengths", [(23,), (7, 40, 23)])
def test_the_pass_with_the_static_text_half_sounds_as_the_packed_one(
    model: Any, lengths: tuple[int, ...]
) -> None:
    """Padded to a 32-token bucket (alone: 25 ids -> 32; batched: 42 -> 64): durations equal,
    audio equal to float32 rounding."""
    items = _items(lengths)
    audio, durations, f0 = forward_batch(model, items)
    static = PassOptions(text=StaticText(model, bucket_tokens=32))
    audio_s, durations_s, f0_s = forward_batch(model, items, options=static)
    assert len(set(np.concatenate(durations).tolist())) > 1  # the head reads its input
    for row in range(len(items)):
        np.testing.assert_array_equal(durations_s[row], durations[row])
        assert audio_s[row].shape == audio[row].shape
        assert np.corrcoef(audio_s[row], audio[row])[0, 1] > 0.99999
        np.testing.assert_allclose(f0_s[row], f0[row], rtol=1e-3, atol=1e-3)


def test_static_text_outputs_match_the_packed_modules(model: Any) -> None:
    """Every output of the text half, not only what survives rounding to frames."""
    from tts_server.engine.torch_backend import _batch_inputs, _text_half

    items = _items((5, 30, 12))
    ids, lengths, styles, speeds, padding = _batch_inputs(items, "cpu")
    with torch.inference_mode():
        packed = _text_half(model, ids, lengths, styles, speeds, padding, PassOptions())
        static = _text_half(
            model, ids, lengths, styles, speeds, padding, PassOptions(text=StaticText(model))
        )
    for got, expected in zip(static, packed, strict=True):
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_text_graphs_need_the_synthesis_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_CUDA_GRAPHS", raising=False)
    monkeypatch.delenv("ENGINE_TEXT_GRAPHS", raising=False)
    assert "TORCH_TEXT_GRAPHS" not in planned_settings("cuda", 64)
    monkeypatch.setenv("ENGINE_TEXT_GRAPHS", "1")
    with pytest.raises(EngineError, match="needs ENGINE_CUDA_GRAPHS"):
        planned_settings("cuda", 64)
    monkeypatch.setenv("ENGINE_CUDA_GRAPHS", "8")
    assert planned_settings("cuda", 64)["TORCH_TEXT_GRAPHS"] == "1"
    with pytest.raises(EngineError, match="needs a CUDA device"):
        planned_settings("cpu", 64)


def test_the_static_text_half_reads_nothing_on_the_host(
    random_model_dir: Path, tmp_path: Path
) -> None:
    """What a CUDA graph needs, checked without a GPU: the meta device holds no data, so any
    read of a value on the host (`.item()`, a branch on a tensor) raises there. The 2-D mask
    that the packed path gives ALBERT does such a read (transformers checks it on the host);
    the static half's 4-D mask does not."""
    config = json.loads((random_model_dir / "config.json").read_text(encoding="utf-8"))
    torch.save({}, tmp_path / "empty.pth")
    model = build_kmodel(config, tmp_path / "empty.pth").to("meta")
    batch, width = 2, 64
    ids = torch.ones((batch, width), dtype=torch.long, device="meta")
    lengths = torch.full((batch,), width, dtype=torch.long, device="meta")
    styles, speeds = torch.zeros((batch, 256), device="meta"), torch.ones(batch, device="meta")
    with torch.inference_mode():
        d, duration, text = StaticText(model).compute(ids, lengths, styles, speeds)
        assert (d.shape, duration.shape, text.shape) == ((2, 64, 640), (2, 64), (2, 512, 64))
        with pytest.raises(RuntimeError, match="meta"):
            model.bert(ids, attention_mask=torch.ones((batch, width), device="meta").int())
