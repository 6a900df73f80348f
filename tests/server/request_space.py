"""The request space for the fuzzers: strategies generated from the request model's JSON
schema, then mutated toward what a hostile client sends.

`schema_values(schema)` draws values that fit a JSON schema (pydantic's output: objects,
`$ref`s, consts, enums, patterns, lengths); `valid_requests` pins the few things the schema
cannot say (the loaded voices, the languages, a tiny transcript so synthesis stays cheap);
`hostile_bodies` takes either and mutates it: odd Unicode (lone surrogates, zero-width,
right-to-left, emoji, control characters), huge and non-finite numbers, deep nesting, wrong
types, missing and extra fields, oversized bodies, and bytes that are not JSON at all.

A drawn body is a `Body`: the exact text to send (JSON that `json.dumps` cannot write, such
as NaN or a 5000-digit integer, is spliced in raw) and whether it is a request the server
must serve (`valid`), as opposed to one it must refuse with a 4xx.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from tts_server.protocol import SAMPLE_RATES, TtsRequest

REQUEST_SCHEMA: dict[str, Any] = TtsRequest.model_json_schema()
LANGUAGES = ("en", "ja")
# Tiny transcripts: a valid request costs a fraction of a second of synthesis.
WORDS = {"en": ("Hi.", "Yes.", "No, thanks.", "Hello there."), "ja": ("はい。", "こんにちは。")}


@dataclass(frozen=True)
class Raw:
    """JSON text spliced in as is (what json.dumps refuses or would write differently)."""

    text: str


@dataclass(frozen=True)
class Body:
    text: str
    must_serve: bool  # a valid request: 200 ending in done (else any 4xx, or a 200)

    def encode(self) -> bytes:
        # surrogatepass: a raw lone surrogate (not an escape) must reach the wire as the
        # bytes a broken client would send, which the server refuses as not UTF-8.
        return self.text.encode("utf-8", "surrogatepass")


def to_json(value: Any) -> str:
    """JSON text of `value`, with `Raw` pieces spliced in; never recursive in Python."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = (f"{json.dumps(k)}:{to_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    return json.dumps(value)


# -- from the schema ----------------------------------------------------------------------


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return {**node, **{k: v for k, v in schema.items() if k != "$ref"}}


def schema_values(schema: dict[str, Any], root: dict[str, Any] | None = None) -> st.SearchStrategy:
    """Values that fit `schema`: every required property, any subset of the optional ones."""
    root = root or schema
    schema = _resolve(schema, root)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([schema_values(s, root) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: schema_values(v, root) for k, v in properties.items() if k in required},
            optional={
                k: schema_values(v, root) for k, v in properties.items() if k not in required
            },
        )
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(
            min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 40), 40)
        )
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(schema_values(schema.get("items", {}), root), max_size=3)
    return st.none()


# -- valid requests ---------------------------------------------------------------------------


@st.composite
def valid_requests(draw: st.DrawFn, voices: Sequence[str]) -> dict[str, Any]:
    """A request the server must serve: the schema's shape, the engine's semantics."""
    body = draw(schema_values(REQUEST_SCHEMA))
    language = draw(st.sampled_from(LANGUAGES))
    body["language"] = language
    body["transcript"] = draw(st.sampled_from(WORDS[language]))
    body["voice"] = {"mode": "id", "id": draw(st.sampled_from(sorted(voices)))}
    body["output_format"]["sample_rate"] = draw(st.sampled_from(SAMPLE_RATES))
    config = body.get("generation_config")
    if config is not None:
        config["speed"] = draw(st.floats(0.5, 2.0))
        config["volume"] = draw(st.floats(0.0, 2.0))
    if draw(st.booleans()) and "voice" in body:
        body["voice_id"] = body.pop("voice")  # the alias
    return body


# -- hostile values ---------------------------------------------------------------------------

ODD_CHARACTERS = (
    "\ud800", "\udfff", "\ud83d",  # lone surrogates (as JSON escapes)
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff",  # zero-width
    "\u200e", "\u200f", "\u202e", "\u2067",  # direction marks and overrides
    "😀", "👩‍👩‍👧", "🏳️‍🌈", "\U0010ffff",  # emoji, ZWJ sequences, the last code point
    "\x00", "\x07", "\x1b", "\x7f", "\u0085", "\u2028",  # control and line separators
    "é", "ﬁ", "Ａ", "ǅ", "\u0301\u0301\u0301",  # composed, ligature, full-width, combining
)  # fmt: skip

odd_text = st.lists(
    st.one_of(st.sampled_from(ODD_CHARACTERS), st.characters(codec=None, exclude_categories=())),
    max_size=30,
).map("".join)

huge_numbers = st.sampled_from(
    [
        Raw("9" * 5000),
        Raw("-" + "1" * 4301),
        Raw("1" * 301),
        Raw("1e999"),
        Raw("-1e400"),
        Raw("NaN"),
        Raw("Infinity"),
        Raw("-Infinity"),
        Raw("1.7976931348623157e308"),
        Raw("5e-324"),
        Raw("-0.0"),
        Raw("1" + "0" * 299),
    ]
)


def _nested(depth: int, kind: str) -> Raw:
    return Raw(
        ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)
    )


deep_nesting = st.builds(
    _nested, st.sampled_from([50, 1000, 100_000]), st.sampled_from(["list", "obj"])
)

wrong_types = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.just(""),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)

hostile_values = st.one_of(odd_text, huge_numbers, deep_nesting, wrong_types)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside dicts and lists, the root excluded."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*prefix, key))
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*prefix, index))
            found.extend(_paths(item, (*prefix, index)))
    return found


def _parent(body: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        body = body[key]
    return body


@st.composite
def mutated(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any] | Raw | Any:
    """`body` after one to three mutations (it is a fresh copy, the caller's stays intact)."""
    current: Any = json.loads(json.dumps(body))
    for _ in range(draw(st.integers(1, 3))):
        if not isinstance(current, dict):
            break
        paths = _paths(current)
        action = draw(
            st.sampled_from(["replace", "replace", "delete", "extra", "odd_suffix", "root"])
        )
        if action == "root":
            current = draw(hostile_values)
        elif action == "extra":
            current[draw(st.one_of(odd_text, st.sampled_from(["type", "x", "voice_id"])))] = draw(
                hostile_values
            )
        elif paths:
            path = draw(st.sampled_from(paths))
            parent = _parent(current, path)
            if action == "delete":
                del parent[path[-1]]
            elif action == "odd_suffix" and isinstance(parent[path[-1]], str):
                parent[path[-1]] = parent[path[-1]] + draw(odd_text)
            else:
                parent[path[-1]] = draw(hostile_values)
    return current


not_json = st.one_of(
    st.binary(max_size=60).map(lambda b: Raw(b.decode("latin-1"))),
    st.sampled_from(
        [
            Raw(""),
            Raw("{"),
            Raw('{"context_id": "a",}'),
            Raw("\ufeff{}"),
            Raw('"\\ud800"'),
            Raw("[]"),
            Raw("null"),
            Raw('{"context_id": "\\ud800\\u0000"}'),
            Raw('{"transcript": "\ud800"}'),  # a raw surrogate: not UTF-8 on the wire
        ]
    ),
)


@st.composite
def hostile_bodies(draw: st.DrawFn, voices: Sequence[str]) -> Body:
    """A request body: valid, mutated from valid, or not a request at all."""
    base = draw(valid_requests(voices))
    # Mostly refusals, which cost the server nothing; a valid request costs a synthesis
    # (seconds on a shared 2-core machine), so about one in ten is one, plus the mutated
    # ones that stay valid (odd Unicode appended to the transcript reaches G2P that way).
    kind = draw(st.sampled_from(["valid"] + ["mutated"] * 6 + ["not_json"] * 2 + ["padded"]))
    if kind == "valid":
        return Body(to_json(base), must_serve=True)
    if kind == "not_json":
        return Body(to_json(draw(not_json)), must_serve=False)
    if kind == "padded":  # past the 64 KiB body limit by a little or by a lot
        pad = draw(st.sampled_from([70_000, 300_000]))
        return Body(to_json({**base, "transcript": "a" * pad}), must_serve=False)
    return Body(to_json(draw(mutated(base))), must_serve=False)
