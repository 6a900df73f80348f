"""The text front end before G2P: inline tags, sentence splitting and validation.

A transcript may hold `<speed ratio='1.5'/>` and `<volume ratio='0.5'/>` tags; each applies
from that point on, on top of the request's own speed and volume. The text between tags is
cut at sentence ends so that the first segment can be synthesised (and streamed) while the
rest is still waiting. Problems come back as `InputProblem`s on the `transcript` field, all
of them at once, so a caller can name every mistake in one answer.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from tts_server.engine.base import InputProblem

MAX_TRANSCRIPT_CHARS = 5000
SPEED_RANGE = (0.25, 4.0)
VOLUME_RANGE = (0.0, 4.0)
_FIELD = "transcript"

_TAG = re.compile(r"<[^<>]*>")
_KNOWN_TAG = re.compile(
    r"<\s*(?P<name>speed|volume)\s+ratio\s*=\s*(?P<q>['\"]?)(?P<value>[^'\"\s/>]*)(?P=q)\s*/\s*>",
    re.IGNORECASE,
)
# A sentence ends at . ! ? (ASCII: only before whitespace, so 3.5 and e.g. stay whole) or at
# the full-width marks and newlines, which need no space after them.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]”’]*\s+|(?<=[。！？!?])[」』）]*|\n+")
_ABBREVIATIONS = frozenset(
    ["mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "etc.", "e.g.", "i.e.", "prof.", "jr."]
)


@dataclass(frozen=True, slots=True)
class TextPiece:
    """A span of plain text with the speed and gain ratios that apply to it."""

    text: str
    speed_ratio: float = 1.0
    volume_ratio: float = 1.0


def _ratio(name: str, raw: str, problems: list[InputProblem]) -> float | None:
    low, high = SPEED_RANGE if name == "speed" else VOLUME_RANGE
    try:
        value = float(raw)
    except ValueError:
        problems.append(InputProblem(_FIELD, f"<{name} ratio='{raw}'/>: ratio must be a number"))
        return None
    if not low <= value <= high:
        problems.append(
            InputProblem(_FIELD, f"<{name} ratio='{raw}'/>: ratio must be in [{low}, {high}]")
        )
        return None
    return value


def parse_tags(transcript: str) -> tuple[list[TextPiece], list[InputProblem]]:
    """Split at tags into pieces carrying the ratios in force; report every bad tag."""
    problems: list[InputProblem] = []
    pieces: list[TextPiece] = []
    speed = volume = 1.0
    cursor = 0
    for match in _TAG.finditer(transcript):
        pieces.append(TextPiece(transcript[cursor : match.start()], speed, volume))
        cursor = match.end()
        known = _KNOWN_TAG.fullmatch(match.group(0))
        if known is None:
            problems.append(
                InputProblem(
                    _FIELD,
                    f"unknown tag {match.group(0)!r}; only <speed ratio='R'/> and "
                    "<volume ratio='R'/> are supported",
                )
            )
            continue
        value = _ratio(known["name"].lower(), known["value"], problems)
        if value is not None and known["name"].lower() == "speed":
            speed = value
        elif value is not None:
            volume = value
    pieces.append(TextPiece(transcript[cursor:], speed, volume))
    return [p for p in pieces if p.text.strip()], problems


def split_sentences(text: str) -> list[str]:
    """Cut text at sentence ends; abbreviations such as `Dr.` do not end a sentence."""
    sentences: list[str] = []
    pending = ""
    cursor = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() == match.start() and match.start() in (0, len(text)):
            continue
        chunk = pending + text[cursor : match.end()]
        cursor = match.end()
        words = chunk.split()
        if words and words[-1].lower() in _ABBREVIATIONS:
            pending = chunk
            continue
        pending = ""
        if chunk.strip():
            sentences.append(chunk.strip())
    rest = (pending + text[cursor:]).strip()
    if rest:
        sentences.append(rest)
    return sentences


# Characters that carry nothing to say: spaces, line and paragraph separators, control and
# format characters (zero-width space and joiners, direction marks, the BOM).
_SILENT_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})


def _is_silent(text: str) -> bool:
    return all(unicodedata.category(c) in _SILENT_CATEGORIES for c in text)


def _first_surrogate(text: str) -> int | None:
    """Where the first lone UTF-16 surrogate is (valid JSON, not Unicode; G2P raises on it)."""
    for index, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            return index
    return None


def segment_text(transcript: str) -> tuple[list[TextPiece], list[InputProblem]]:
    """Tags, then sentences: the pieces an utterance is synthesised in, in order."""
    problems: list[InputProblem] = []
    if (at := _first_surrogate(transcript)) is not None:
        return [], [
            InputProblem(
                _FIELD,
                f"transcript holds a lone UTF-16 surrogate at character {at}; send valid Unicode",
            )
        ]
    if _is_silent(transcript):
        return [], [
            InputProblem(
                _FIELD,
                "nothing to say: the transcript is empty or only spaces, control and "
                "zero-width characters; send some text to speak",
            )
        ]
    if len(transcript) > MAX_TRANSCRIPT_CHARS:
        problems.append(
            InputProblem(
                _FIELD,
                f"transcript has {len(transcript)} characters; split it into requests of at "
                f"most {MAX_TRANSCRIPT_CHARS}",
            )
        )
    tagged, tag_problems = parse_tags(transcript)
    problems.extend(tag_problems)
    pieces = [
        TextPiece(sentence, piece.speed_ratio, piece.volume_ratio)
        for piece in tagged
        for sentence in split_sentences(piece.text)
    ]
    if not pieces and not problems:
        problems.append(InputProblem(_FIELD, "transcript holds only tags; add text to speak"))
    return pieces, problems


def effective_ratio_problems(
    pieces: Sequence[TextPiece], speed: float, volume: float
) -> list[InputProblem]:
    """The request's speed and volume times each piece's tag ratios, checked against the
    same ranges as each alone: a 0.25 tag on a 0.25 request would be 1/16 speed, whose one
    sentence is minutes of audio and gigabytes of model memory."""
    problems: list[InputProblem] = []
    seen: set[tuple[str, float]] = set()
    for piece in pieces:
        for name, base, ratio, (low, high) in (
            ("speed", speed, piece.speed_ratio, SPEED_RANGE),
            ("volume", volume, piece.volume_ratio, VOLUME_RANGE),
        ):
            effective = base * ratio
            if low <= effective <= high or (name, ratio) in seen:
                continue
            seen.add((name, ratio))
            problems.append(
                InputProblem(
                    _FIELD,
                    f"<{name} ratio='{ratio:g}'/> on a request {name} of {base:g} gives an "
                    f"effective {name} of {effective:g}, outside [{low}, {high}]; the product "
                    "must lie in that range",
                )
            )
    return problems
