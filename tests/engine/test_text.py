"""The text front end: tags, sentence splitting, and the problems a caller is told about."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tts_server.engine.text import MAX_TRANSCRIPT_CHARS, segment_text, split_sentences

words = st.text(alphabet="abcdefghij ", min_size=1, max_size=30)
ratios = st.floats(min_value=0.25, max_value=4.0, allow_nan=False).map(lambda r: round(r, 2))


@given(st.lists(st.tuples(words, st.sampled_from(["speed", "volume"]), ratios), max_size=5))
def test_tags_apply_from_their_position_on(parts: list[tuple[str, str, float]]) -> None:
    transcript = "".join(f"{text}<{name} ratio='{ratio}'/>" for text, name, ratio in parts) + "end"
    pieces, problems = segment_text(transcript)
    assert problems == []
    assert pieces[-1].text == "end"
    speed = next((r for _, n, r in reversed(parts) if n == "speed"), 1.0)
    volume = next((r for _, n, r in reversed(parts) if n == "volume"), 1.0)
    assert (pieces[-1].speed_ratio, pieces[-1].volume_ratio) == (speed, volume)
    spoken = "".join(p.text for p in pieces).replace(" ", "")
    assert spoken == re.sub(r"<[^>]*>", "", transcript).replace(" ", "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Dr. Smith paid 3.5 dollars. Done.", ["Dr. Smith paid 3.5 dollars.", "Done."]),
        ("こんにちは。元気ですか？はい", ["こんにちは。", "元気ですか？", "はい"]),
        ("line one\nline two", ["line one", "line two"]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
    ],
)
def test_sentences_split_where_a_reader_would_pause(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("transcript", "message_part"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("<speed ratio='1.5'/>", "only tags"),
        ("Hi <pitch ratio='2'/> there", "unknown tag"),
        ("Hi <speed ratio='fast'/>", "must be a number"),
        ("Hi <speed ratio='9'/>", "must be in"),
        ("Hi <volume ratio='-1'/>", "must be in"),
        ("a" * (MAX_TRANSCRIPT_CHARS + 1), "characters"),
    ],
)
def test_bad_transcripts_are_named(transcript: str, message_part: str) -> None:
    _, problems = segment_text(transcript)
    assert problems, transcript
    assert all(p.field == "transcript" for p in problems)
    assert any(message_part in p.message for p in problems)


def test_every_bad_tag_is_reported_at_once() -> None:
    _, problems = segment_text("a <x/> b <speed ratio=0/> c <volume ratio=z/>")
    assert len(problems) == 3


def test_speech_check_rejects_what_is_not_speech() -> None:
    import numpy as np

    from tests.engine.speech import speech_problems

    rng = np.random.default_rng(0)
    t = np.arange(48_000) / 24_000
    assert speech_problems(np.zeros(48_000, np.float32), 5)  # silence
    assert speech_problems(0.3 * np.sin(2 * np.pi * 220 * t), 5)  # steady tone
    assert speech_problems(np.clip(rng.normal(0, 2, 48_000), -1, 1), 5)  # clipped noise
    assert speech_problems(0.1 * rng.normal(size=24_000 * 30), 5)  # 30 s for 5 words
