"""The wire protocol: the request schema, its strict validation, and the events the server sends.

`parse_request` turns raw JSON into a `TtsRequest` or a list of `FieldProblem`s naming every
bad field at once (schema problems from pydantic, then language, voice, text and tag problems
from the engine). The event builders produce the objects SPEC §3 lists; `encode_line` frames
one as a newline-terminated JSON line for the HTTP stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from tts_bench.strict import StrictModel, UnrepresentableNumber, strict_loads
from tts_server.engine.base import Engine, SynthesisRequest

Encoding = Literal["pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw"]
# The common telephony and media rates the model's native 24 kHz is resampled to.
SAMPLE_RATES: tuple[int, ...] = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
_CONTEXT_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One bad field of a request: `field` is a dotted path in the request (or `body`)."""

    field: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


class _Strict(StrictModel):
    # strict: "1" is not an int and 1 is not a bool; wrong types are the caller's to fix.
    # (The shared base refuses NaN and infinities too: decode_json refuses them already; the
    # model must not rely on it.)
    model_config = ConfigDict(strict=True, frozen=True)


class VoiceSpec(_Strict):
    mode: Literal["id"]
    id: str = Field(min_length=1, max_length=64)


class OutputFormat(_Strict):
    container: Literal["raw"]
    encoding: Encoding
    sample_rate: int

    @field_validator("sample_rate")
    @classmethod
    def _common_rate(cls, rate: int) -> int:
        if rate not in SAMPLE_RATES:
            raise ValueError(f"must be one of {', '.join(map(str, SAMPLE_RATES))}")
        return rate


class GenerationConfig(_Strict):
    """Speed and gain for the whole utterance; the engine checks their ranges."""

    speed: float = 1.0
    volume: float = 1.0


class TtsRequest(_Strict):
    """One synthesis request, after the Sonic-3 style (SPEC §3)."""

    context_id: str = Field(pattern=_CONTEXT_ID_PATTERN)
    transcript: str
    language: str = Field(min_length=1, max_length=16)
    voice: VoiceSpec = Field(validation_alias=AliasChoices("voice", "voice_id"))
    output_format: OutputFormat
    generation_config: GenerationConfig = GenerationConfig()
    add_timestamps: bool = False
    add_phoneme_timestamps: bool = False
    use_normalized_timestamps: bool = False

    @field_validator("transcript")
    @classmethod
    def _bounded(cls, text: str, info: ValidationInfo) -> str:
        limit = (info.context or {}).get("max_transcript_chars")
        if limit is not None and len(text) > limit:
            raise ValueError(f"is {len(text)} characters; at most {limit} are accepted")
        return text

    def synthesis_request(self) -> SynthesisRequest:
        return SynthesisRequest(
            text=self.transcript,
            language=self.language,
            voice=self.voice.id,
            speed=self.generation_config.speed,
            volume=self.generation_config.volume,
        )


def _loc(loc: Sequence[int | str]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def decode_json(body: bytes) -> tuple[Any, list[FieldProblem]]:
    """The body as JSON, or a `body` problem; then a problem per string that is not Unicode.

    Never raises: NaN, Infinity, numbers beyond the float range and integers of more than
    `tts_bench.strict.MAX_INTEGER_DIGITS` digits are `body` problems. A string holding a lone
    UTF-16 surrogate (valid JSON, `\\ud800`, but not Unicode) is a problem named by its field;
    the value still comes back so the caller can echo a good `context_id`.
    """
    try:
        data = strict_loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        return None, [FieldProblem("body", "is not UTF-8 text; send a JSON object")]
    except json.JSONDecodeError as exc:
        return None, [FieldProblem("body", f"is not valid JSON ({exc.msg} at {exc.pos})")]
    except UnrepresentableNumber as exc:
        return None, [FieldProblem("body", str(exc))]
    except RecursionError:
        return None, [FieldProblem("body", "nests too deeply; send a flat request object")]
    except ValueError as exc:  # the interpreter's own integer-size limit, and the like
        return None, [FieldProblem("body", f"holds a value JSON parsing refused ({exc})")]
    return data, _surrogate_problems(data)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate_problems(data: Any) -> list[FieldProblem]:
    """A problem for every string (key or value) holding a lone surrogate; iterative, so a
    deeply nested value cannot exhaust the stack."""
    problems: list[FieldProblem] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not _is_unicode(value):
                problems.append(FieldProblem(_loc(path), _SURROGATE))
        elif isinstance(value, dict):
            for key, item in value.items():
                if not _is_unicode(key):
                    problems.append(FieldProblem(_loc(path), f"a key {_SURROGATE}"))
                    continue
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, str(i)), item) for i, item in enumerate(value))
    return sorted(problems, key=lambda p: p.field)


_SURROGATE = "holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape unpaired); send valid Unicode"


def parse_request(
    data: Any, engine: Engine, max_transcript_chars: int
) -> tuple[TtsRequest | None, list[FieldProblem]]:
    """Validate a decoded JSON value; the request, or every problem with it."""
    if not isinstance(data, Mapping):
        return None, [FieldProblem("body", "must be a JSON object")]
    problems: list[FieldProblem] = []
    request: TtsRequest | None = None
    try:
        request = TtsRequest.model_validate(
            data, context={"max_transcript_chars": max_transcript_chars}
        )
    except ValidationError as exc:
        problems = [FieldProblem(_loc(e["loc"]), e["msg"]) for e in exc.errors()]
    reported = {p.field.replace("voice_id", "voice", 1) for p in problems}
    problems.extend(_engine_problems(data, engine, reported))
    return (request if not problems else None), problems


# The engine names fields in its own terms; these are the request's.
_ENGINE_FIELD = {
    "text": "transcript",
    "transcript": "transcript",
    "language": "language",
    "voice": "voice.id",
    "speed": "generation_config.speed",
    "volume": "generation_config.volume",
}


def _engine_problems(
    data: Mapping[str, Any], engine: Engine, reported: set[str]
) -> list[FieldProblem]:
    """Language, voice, text, tag, speed and volume problems the engine finds, for fields
    the schema did not already report (a field of the wrong type is not asked about)."""
    voice_key = "voice_id" if "voice_id" in data and "voice" not in data else "voice"
    voice = data.get(voice_key)
    voice_id = voice.get("id") if isinstance(voice, Mapping) else None
    config = data.get("generation_config")
    config = config if isinstance(config, Mapping) else {}
    speed, volume = config.get("speed", 1.0), config.get("volume", 1.0)
    values = {
        "transcript": data.get("transcript"),
        "language": data.get("language"),
        "voice.id": voice_id,
    }
    unusable = {name for name, value in values.items() if not isinstance(value, str)}
    unusable |= {
        name
        for name, value in (
            ("generation_config.speed", speed),
            ("generation_config.volume", volume),
        )
        if isinstance(value, bool) or not isinstance(value, int | float)
    }
    candidate = SynthesisRequest(
        text=values["transcript"] if "transcript" not in unusable else "",
        language=values["language"] if "language" not in unusable else "",
        voice=values["voice.id"] if "voice.id" not in unusable else "",
        speed=float(speed) if "generation_config.speed" not in unusable else 1.0,
        volume=float(volume) if "generation_config.volume" not in unusable else 1.0,
    )
    found: list[FieldProblem] = []
    for problem in engine.check(candidate):
        name = _ENGINE_FIELD.get(problem.field, problem.field)
        if name in unusable or _overlaps(name, reported):
            continue
        if name == "voice.id":
            name = f"{voice_key}.id"
        found.append(FieldProblem(name, problem.message))
    return found


def _overlaps(name: str, reported: set[str]) -> bool:
    """True when the schema already reported `name`, a field inside it, or a field around it."""
    return any(
        name == other or name.startswith(other + ".") or other.startswith(name + ".")
        for other in reported
    )


# Events (SPEC §3). Every event carries the request's context_id.


def chunk_event(context_id: str, data_b64: str, sampling_rate: int, step_time: float) -> dict:
    """`step_time`: seconds the engine spent on this chunk's segment, on the segment's first
    chunk (0 on the others), so the step times of a stream add up to its generation time."""
    return {
        "type": "chunk",
        "context_id": context_id,
        "status_code": 206,
        "done": False,
        "data": data_b64,
        "sampling_rate": sampling_rate,
        "step_time": round(step_time, 6),
    }


def word_timestamps_event(
    context_id: str, words: Sequence[str], starts: Sequence[float], ends: Sequence[float]
) -> dict:
    return {
        "type": "timestamps",
        "context_id": context_id,
        "status_code": 206,
        "done": False,
        "word_timestamps": {"words": list(words), "start": list(starts), "end": list(ends)},
    }


def phoneme_timestamps_event(
    context_id: str, phonemes: Sequence[str], starts: Sequence[float], ends: Sequence[float]
) -> dict:
    return {
        "type": "phoneme_timestamps",
        "context_id": context_id,
        "status_code": 206,
        "done": False,
        "phoneme_timestamps": {
            "phonemes": list(phonemes),
            "start": list(starts),
            "end": list(ends),
        },
    }


def done_event(context_id: str, first_chunk_latency_ms: float | None = None) -> dict:
    """The stream's last event; it carries the server's own FirstChunkLatency when known,
    so a load generator can record service time over any transport (batching alarm)."""
    event = {"type": "done", "context_id": context_id, "done": True, "status_code": 200}
    if first_chunk_latency_ms is not None:
        event["first_chunk_latency_ms"] = round(first_chunk_latency_ms, 3)
    return event


def error_event(context_id: str | None, status_code: int, error: str, **details: Any) -> dict:
    return {
        "type": "error",
        "context_id": context_id,
        "status_code": status_code,
        "error": error,
        "done": True,
        **details,
    }


def invalid_request_body(problems: Sequence[FieldProblem]) -> dict:
    """The 422 body: one line per problem in `message`, and the list in `errors`."""
    return {
        "error": "invalid_request",
        "message": "; ".join(f"{p.field}: {p.message}" for p in problems),
        "errors": [p.as_json() for p in problems],
    }


def event_text(event: Mapping[str, Any]) -> str:
    """One event as JSON text that UTF-8 can always carry: an error event may echo a field
    that holds a lone surrogate; it comes out as its JSON escape, so it parses back the same."""
    text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def encode_line(event: Mapping[str, Any]) -> bytes:
    return event_text(event).encode("utf-8") + b"\n"


# Stands in for a chunk's data while a template is cut from a real chunk event.
_DATA_FIELD = '"data":"'
_DATA_MARK = "DATA"


def _chunk_template(context_id: str, sampling_rate: int, step_time: float) -> tuple[str, str]:
    """(text before the data, text after it) of `event_text(chunk_event(...))`.

    Cut from the event itself, so the two can never disagree; base64 needs no JSON escape,
    so head + data + tail is exactly the text the encoder would write for that data. The data
    field is found from the right: after it come only numbers, and before it no string can
    hold an unescaped quote.
    """
    text = event_text(chunk_event(context_id, _DATA_MARK, sampling_rate, step_time))
    head, _, tail = text.rpartition(_DATA_FIELD + _DATA_MARK + '"')
    return head + _DATA_FIELD, '"' + tail


def chunk_event_texts(
    context_id: str, chunks_b64: Sequence[str], sampling_rate: int, step_time: float
) -> list[str]:
    """The `event_text` of each chunk event of one segment: `step_time` on the first, 0 on
    the rest. The JSON encoder runs twice per segment instead of once per 20 ms chunk: at
    the engine's peak that is tens of thousands of encoder calls a second saved."""
    if not chunks_b64:
        return []
    first_head, first_tail = _chunk_template(context_id, sampling_rate, step_time)
    head, tail = _chunk_template(context_id, sampling_rate, 0.0)
    return [first_head + chunks_b64[0] + first_tail] + [
        head + data + tail for data in chunks_b64[1:]
    ]
