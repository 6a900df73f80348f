"""Imported weights: the torch backend against the onnx backend it was converted from.

Metrics and thresholds (measured values on this machine in the comments):
- durations: every token within ±1 frame (25 ms) of the onnx graph's; the total over all
  sentences within 1 %; each sentence's total within 2 frames. (Measured: max |diff| 1
  frame, totals 0-2 frames apart, 0.5 % over the set. The int8 graph quantizes activations
  on the fly, so a duration sitting at .5 can round the other way.)
- with the onnx durations forced (generator noise is off in both): F0 over frames voiced
  in both, median relative error ≤ 2 % and Pearson r ≥ 0.99 (measured 0.2-0.3 %, 0.9998);
  audio as an 80-band log-mel spectrogram, mean |dB difference| ≤ 6 dB and Pearson
  r ≥ 0.95 over frames within 50 dB of the loudest (measured 3.9-4.1 dB, r 0.98).
  Sample-by-sample comparison is not meaningful: a 0.3 % F0 difference drifts the phase of
  the harmonic source by cycles within a second.
- batching: a short sentence padded in a batch with a long one matches itself alone,
  waveform Pearson r ≥ 0.999 (measured 0.9999).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tts_server.engine.backend import InferenceItem

from tests.engine.speech import log_mel_distance

pytestmark = pytest.mark.slow

SENTENCES = [
    ("Thank you for calling, how can I help you today?", "en"),
    ("今日の説明を始めます。", "ja"),
    ("Good morning.", "en"),
]


@dataclass(frozen=True)
class Reference:
    item: InferenceItem
    durations: np.ndarray
    f0: np.ndarray
    audio: np.ndarray


@pytest.fixture(scope="module")
def imported_model() -> object:
    import json

    from tts_server.engine.onnx_import import imported_model_dir
    from tts_server.engine.torch_backend import build_kmodel, prepare_for_inference

    root = imported_model_dir()  # converts the PyPI ONNX once into the cache directory
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    # As the backend serves it: weight norm folded (the CPU path: float32, eager).
    return prepare_for_inference(build_kmodel(config, root / "kokoro-v1_0.pth"), "cpu")


@pytest.fixture(scope="module")
def references() -> list[Reference]:
    """The onnx graph's durations, F0 and audio for each sentence (voice jf_alpha)."""
    import onnx
    import onnxruntime as ort
    from tts_server.engine.g2p import Phonemizer
    from tts_server.engine.offline_weights import ensure_offline_model

    offline = ensure_offline_model()
    graph = onnx.load(str(offline.onnx_path))
    f0_tensor = "/encoder/F0_proj/Conv_output_0"
    graph.graph.output.append(
        onnx.helper.make_tensor_value_info(f0_tensor, onnx.TensorProto.FLOAT, None)
    )
    options = ort.SessionOptions()
    # One thread, as the suite's engines run: no pool spinning beside the other busy worker.
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        graph.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    phonemizer = Phonemizer(offline.vocab)
    out = []
    for text, language in SENTENCES:
        phonemes = phonemizer.phonemize(text, language).phonemes
        ids = np.array([offline.vocab[c] for c in phonemes], np.int64)
        style = offline.voices["jf_alpha"][len(ids) - 1].reshape(256)
        audio, durations, f0 = session.run(
            ["audio", "durations", f0_tensor],
            {"tokens": np.array([[0, *ids, 0]]), "style": style[None, :],
             "speed": np.array([1.0], np.float32)},
        )  # fmt: skip
        out.append(
            Reference(
                InferenceItem(ids, style, 1.0),
                durations.reshape(-1).astype(np.int64),
                f0.reshape(-1),
                audio.reshape(-1),
            )
        )
    return out


@pytest.fixture(scope="module")
def batched(imported_model: object, references: list[Reference]) -> tuple[list, list, list]:
    """One padded forward pass over every sentence: (audio, durations, F0) per item."""
    from tts_server.engine.torch_backend import forward_batch

    return forward_batch(imported_model, [r.item for r in references])


def test_import_writes_the_hugging_face_layout(imported_model: object) -> None:
    from tts_server.engine.onnx_import import imported_model_dir
    from tts_server.engine.torch_backend import ModelDir

    files = ModelDir.find(imported_model_dir())
    assert set(files.voices) == {"jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"}
    assert isinstance(files.weights, Path)


def test_durations_match_the_onnx_graph(batched: tuple, references: list[Reference]) -> None:
    _, durations, _ = batched
    for ours, ref in zip(durations, references, strict=True):
        assert np.max(np.abs(ours - ref.durations)) <= 1
        assert abs(int(ours.sum()) - int(ref.durations.sum())) <= 2
    total_ours = sum(int(d.sum()) for d in durations)
    total_ref = sum(int(r.durations.sum()) for r in references)
    assert abs(total_ours - total_ref) <= 0.01 * total_ref


def test_forced_durations_give_matching_f0_and_audio(
    imported_model: object, references: list[Reference]
) -> None:
    from tts_server.engine.torch_backend import forward_batch

    for ref in references:
        (audio,), _, (f0,) = forward_batch(imported_model, [ref.item], [ref.durations])
        assert len(audio) == len(ref.audio)
        voiced = (f0 > 50) & (ref.f0 > 50)
        assert voiced.mean() > 0.3
        assert np.median(np.abs(f0 - ref.f0)[voiced] / ref.f0[voiced]) <= 0.02
        assert np.corrcoef(f0, ref.f0)[0, 1] >= 0.99
        mean_db, r = log_mel_distance(ref.audio, audio)
        assert mean_db <= 6.0 and r >= 0.95, (mean_db, r)


def test_a_padded_batch_matches_each_item_alone(
    imported_model: object, references: list[Reference], batched: tuple
) -> None:
    """The short sentence, padded to the longest in the batch, against itself alone."""
    from tts_server.engine.torch_backend import forward_batch

    short = references[2].item
    assert len(short.token_ids) < max(len(r.item.token_ids) for r in references)  # padded
    in_batch = batched[0][2]
    (alone,), _, _ = forward_batch(imported_model, [short])
    assert len(in_batch) == len(alone)
    assert np.corrcoef(in_batch, alone)[0, 1] >= 0.999
