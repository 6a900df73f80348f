"""The G2P's pronunciations of every corpus line, recorded, so a change to how the text front
end loads (its imports, its spaCy tokenizer) can be shown to change nothing it says.

The corpora: the ladder's (`loadtest/corpus`), the tests' (`tests/ladder/corpora`) and English
lines that exercise spaCy's tokenizer (`data/tokenizer_cases.txt`). Each line is phonemized
whole and piece by piece (the sentences the engine sends to the G2P). Record again only when a pronunciation is meant to change, and say why in the commit:

    PYTHONPATH=container .venv/bin/python -m tests.engine.pronunciations
"""

from __future__ import annotations

import json
from pathlib import Path

from tts_server.engine.g2p import Phonemized, Phonemizer
from tts_server.engine.text import segment_text

from tts_bench.measure.corpus import load_corpus

REPO = Path(__file__).resolve().parents[2]
CORPORA = [
    *sorted((REPO / "loadtest" / "corpus").glob("*.txt")),
    *sorted((REPO / "tests" / "ladder" / "corpora").glob("*.txt")),
    Path(__file__).resolve().parent / "data" / "tokenizer_cases.txt",
]
RECORDED = Path(__file__).resolve().parent / "data" / "pronunciations.json"

Recorded = dict[str, dict[str, dict[str, object]]]


def corpus_texts() -> dict[str, list[str]]:
    """Per language, every corpus line and each of its sentence pieces, first seen first."""
    texts: dict[str, dict[str, None]] = {}
    for path in CORPORA:
        for utterance in load_corpus(path):
            pieces, _ = segment_text(utterance.transcript)
            seen = texts.setdefault(utterance.language, {})
            for text in [utterance.transcript, *(p.text for p in pieces)]:
                seen.setdefault(text, None)
    return {language: list(seen) for language, seen in texts.items()}


def as_json(result: Phonemized) -> dict[str, object]:
    return {"phonemes": result.phonemes, "words": [[w.word, w.start, w.end] for w in result.words]}


def pronounce(phonemizer: Phonemizer) -> Recorded:
    return {
        language: {text: as_json(phonemizer.phonemize(text, language)) for text in texts}
        for language, texts in corpus_texts().items()
    }


def load_recorded() -> Recorded:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


def main() -> None:
    from tts_server.engine.offline_weights import load_vocab

    recorded = pronounce(Phonemizer(load_vocab()))
    RECORDED.parent.mkdir(exist_ok=True)
    # One line per text, so a changed pronunciation shows as one changed line in a diff.
    lines = ["{"]
    for i, (language, entries) in enumerate(sorted(recorded.items())):
        lines.append(f"  {json.dumps(language)}: {{")
        for j, (key, value) in enumerate(sorted(entries.items())):
            comma = "," if j < len(entries) - 1 else ""
            lines.append(
                f"    {json.dumps(key, ensure_ascii=False)}: "
                f"{json.dumps(value, ensure_ascii=False)}{comma}"
            )
        lines.append("  }" + ("," if i < len(recorded) - 1 else ""))
    text = "\n".join([*lines, "}"]) + "\n"
    RECORDED.write_text(text, encoding="utf-8")
    counts = {language: len(entries) for language, entries in recorded.items()}
    print(f"recorded {counts} pronunciations in {RECORDED.relative_to(REPO)}")


if __name__ == "__main__":
    main()
