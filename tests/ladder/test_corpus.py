"""The request corpus: shipped files parse, directives apply, mistakes name the line."""

from __future__ import annotations

import pytest

from tts_bench.measure.corpus import CorpusError, load_corpus, parse_corpus

from .conftest import REPO


@pytest.mark.parametrize(("name", "language"), [("en.txt", "en"), ("ja.txt", "ja")])
def test_shipped_corpora_are_varied_short_utterances(name, language):
    corpus = load_corpus(REPO / "loadtest" / "corpus" / name)
    assert len(corpus) >= 15
    assert {u.language for u in corpus} == {language}
    lengths = sorted(len(u.transcript) for u in corpus)
    assert lengths[-1] > 4 * lengths[0]  # short and long lines both
    body = corpus[0].request("abc")
    assert body["voice"] == {"mode": "id", "id": "jf_alpha"} and body["context_id"] == "abc"


@pytest.mark.parametrize(
    ("text", "expected", "error"),
    [
        ("# language: en\nHello.\n\n# a comment\nBye.", [("Hello.", "en", "jf_alpha"), ("Bye.", "en", "jf_alpha")], None),
        ("# language: ja\n# voice: jm_kumo\nこんにちは。", [("こんにちは。", "ja", "jm_kumo")], None),
        ("Hello.", None, "<corpus>:1: utterance before any '# language"),
        ("# language: en\n\n", None, "no utterances"),
    ],
)  # fmt: skip
def test_parse_corpus(text, expected, error):
    if error:
        with pytest.raises(CorpusError, match=error):
            parse_corpus(text)
    else:
        assert [(u.transcript, u.language, u.voice) for u in parse_corpus(text)] == expected


def test_missing_corpus_names_the_flag(tmp_path):
    with pytest.raises(CorpusError, match=r"--corpus .*: no such file"):
        load_corpus(tmp_path / "nope.txt")
