"""Engine fixtures: one loaded engine per backend and mode for the whole session.

Loading the weights takes seconds, so every test shares these; the engines are
deterministic (no generator noise), so sharing cannot leak state between tests.
`run` drives coroutines on one event loop that lives as long as the session.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tts_server.engine import Engine, Segment, SynthesisRequest, create_engine

# Any attempt to reach the Hugging Face hub fails loudly instead of downloading.
os.environ["HF_HUB_OFFLINE"] = "1"

Run = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture(scope="session")
def run() -> Iterator[Run]:
    with asyncio.Runner() as runner:
        yield runner.run


async def collect(engine: Engine, request: SynthesisRequest) -> list[Segment]:
    return [segment async for segment in engine.synthesize(request)]


def _loaded(run: Run, engine: Engine) -> Iterator[Engine]:
    run(engine.load())
    yield engine
    run(engine.close())


@pytest.fixture(scope="session")
def onnx_engine(run: Run) -> Iterator[Engine]:
    yield from _loaded(run, create_engine("onnx", "concurrent"))


@pytest.fixture(scope="session")
def onnx_serial_engine(run: Run) -> Iterator[Engine]:
    yield from _loaded(run, create_engine("onnx", "serial"))


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full-size KModel with random weights from the shipped config, in the HF layout."""
    import torch
    from tts_server.engine.model_config import kokoro_82m_config
    from tts_server.engine.offline_weights import load_vocab
    from tts_server.engine.torch_backend import build_kmodel

    root = tmp_path_factory.mktemp("random-kokoro")
    config = kokoro_82m_config(load_vocab())
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    weights = root / "kokoro-v1_0.pth"
    torch.save({}, weights)  # KModel loads nothing from an empty dict: random init stays
    torch.manual_seed(0)
    model = build_kmodel(config, weights)
    # Random duration heads predict ~25 frames (0.6 s) per phoneme; bias them to ~2.5 so a
    # sentence lasts seconds, not a minute, and CPU tests stay short.
    torch.nn.init.zeros_(model.predictor.duration_proj.linear_layer.weight)
    torch.nn.init.constant_(model.predictor.duration_proj.linear_layer.bias, -3.0)
    torch.save({name: getattr(model, name).state_dict() for name in (
        "bert", "bert_encoder", "predictor", "text_encoder", "decoder")}, weights)  # fmt: skip
    (root / "voices").mkdir()
    generator = np.random.default_rng(0)
    for name in ("rand_a", "rand_b"):
        pack = torch.from_numpy(generator.normal(0, 0.1, (510, 1, 256)).astype(np.float32))
        torch.save(pack, root / "voices" / f"{name}.pt")
    return root


@pytest.fixture(scope="session")
def torch_engine(run: Run, random_model_dir: Path) -> Iterator[Engine]:
    # Batches of 4 even on a CPU (default 1 there), so batching is exercised.
    engine = create_engine("torch", "concurrent", model_dir=random_model_dir, max_batch=4)
    yield from _loaded(run, engine)
