"""Hostile input to the server's pure parts: the JSON decoder, the text checks, the log
writer, the settings, and `tts-bench serve`'s own one-line errors."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tts_server.engine import create_engine
from tts_server.engine.text import MAX_TRANSCRIPT_CHARS, segment_text
from tts_server.logs import ServerLog, _JsonFormatter
from tts_server.protocol import decode_json, parse_request
from tts_server.settings import ServerSettings, SettingsError

from tests.server.server_client import speech_request

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine():
    return create_engine()


def strict_utf8_stream() -> io.TextIOWrapper:
    """Like stdout in a container: UTF-8, strict, so a lone surrogate cannot be written."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")


# -- the log writer never raises ------------------------------------------------


# Any code point, lone surrogates well represented (st.text and st.characters' defaults
# leave category Cs out, so the text is built from a list).
ANY_TEXT = st.lists(
    st.one_of(
        st.characters(codec=None, exclude_categories=()),
        st.characters(codec=None, categories=["Cs"]),
    )
).map("".join)


@given(text=ANY_TEXT)
@settings(max_examples=100, deadline=None)
def test_the_log_writer_never_raises_and_its_lines_parse_back_to_the_same_text(text):
    stream = strict_utf8_stream()
    ServerLog(stream).event("invalid_request", request_id=f"x-{text}", errors=[{"m": text}])

    record = json.loads(stream.buffer.getvalue().decode("utf-8"))
    # JSON reads an escaped surrogate pair as the one character it encodes.
    paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    assert record["request_id"] == f"x-{paired}" and record["errors"] == [{"m": paired}]


def test_the_log_writer_survives_values_json_cannot_hold():
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    loop: list[object] = []
    loop.append(loop)
    stream = strict_utf8_stream()
    log = ServerLog(stream)
    log.event("a", value=Unprintable())
    log.event("b", value=loop)

    lines = stream.buffer.getvalue().decode("utf-8").splitlines()
    assert [json.loads(line)["msg"] for line in lines] == ["a", "unloggable_record"]


def test_the_standard_logging_formatter_escapes_lone_surrogates():
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "bad %s", ("\ud800",), None)
    line = _JsonFormatter().format(record)

    line.encode("utf-8")  # would raise on a lone surrogate
    assert json.loads(line)["msg"] == "bad \ud800"


def test_a_transcript_with_a_lone_surrogate_is_refused_before_g2p(engine):
    request, problems = parse_request(speech_request("s", "Hi \udc80 there."), engine, 4000)

    assert request is None
    assert [p.field for p in problems] == ["transcript"]
    assert "surrogate" in problems[0].message


# -- aiohttp's malformed-request log line ---------------------------------------


def test_a_malformed_http_request_record_becomes_a_warning_without_traceback():
    from aiohttp.http_exceptions import BadHttpMessage
    from tts_server.logs import MalformedHttpIsAWarning

    try:
        raise BadHttpMessage("Invalid character in Content-Length:\n\n  b'abc'\n   ^")
    except BadHttpMessage:
        record = logging.LogRecord(
            "aiohttp.server", logging.ERROR, __file__, 1, "Error handling request from %s",
            ("127.0.0.1",), sys.exc_info(),
        )  # fmt: skip
    assert MalformedHttpIsAWarning().filter(record)
    body = json.loads(_JsonFormatter().format(record))

    assert body["level"] == "warning" and "exc" not in body
    assert "\n" not in body["msg"] and "Content-Length" in body["msg"]


def test_a_real_server_error_keeps_its_level_and_traceback():
    from tts_server.logs import MalformedHttpIsAWarning

    try:
        raise KeyError("bug")
    except KeyError:
        record = logging.LogRecord(
            "aiohttp.server", logging.ERROR, __file__, 1, "Error handling request", (),
            sys.exc_info(),
        )  # fmt: skip
    MalformedHttpIsAWarning().filter(record)
    body = json.loads(_JsonFormatter().format(record))

    assert body["level"] == "error" and "KeyError" in body["exc"]


# -- numbers JSON parsing must not raise on ---------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"x": ' + b"1" * 5000 + b"}",
        b'{"x": -' + b"1" * 301 + b"}",
        b'{"x": NaN}',
        b'{"x": Infinity}',
        b'{"x": -Infinity}',
        b'{"x": 1e999}',
        b'{"x": -1e400}',
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_numbers_json_cannot_carry_and_deep_nesting_are_body_problems(raw):
    data, problems = decode_json(raw)

    assert data is None
    assert [p.field for p in problems] == ["body"]


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_decode_json_never_raises_on_any_bytes(raw):
    decode_json(raw)


# -- nothing to say ---------------------------------------------------------------


@pytest.mark.parametrize(
    "transcript", ["\u200b", "\u200b\u200c\u200d", "\ufeff\u2060", "\u200e\u200f\u202e", "\x00\x07"]
)
def test_only_zero_width_control_or_direction_characters_is_nothing_to_say(transcript):
    pieces, problems = segment_text(transcript)

    assert pieces == []
    assert [p.field for p in problems] == ["transcript"]
    assert "nothing to say" in problems[0].message


# -- the effective speed ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "speed", "refused"),
    [
        ("Hi <speed ratio='0.25'/> there.", 0.25, True),
        ("Hi <speed ratio='4'/> there.", 2.0, True),
        ("Hi <speed ratio='0.5'/> there.", 0.5, False),
        ("Hi <speed ratio='4'/> there.", 1.0, False),
    ],
)
def test_the_product_of_a_speed_tag_and_the_request_speed_is_checked(engine, text, speed, refused):
    body = speech_request("e", text, generation_config={"speed": speed})
    request, problems = parse_request(body, engine, 4000)

    assert (request is None) is refused
    if refused:
        assert [p.field for p in problems] == ["transcript"]
        assert "effective speed" in problems[0].message


# -- MAX_TRANSCRIPT_CHARS means what it says ---------------------------------------


def test_a_transcript_limit_above_the_engines_own_is_refused():
    with pytest.raises(SettingsError, match="MAX_TRANSCRIPT_CHARS"):
        ServerSettings.build({"MAX_TRANSCRIPT_CHARS": str(MAX_TRANSCRIPT_CHARS + 1000)})
    built = ServerSettings.build({"MAX_TRANSCRIPT_CHARS": str(MAX_TRANSCRIPT_CHARS)})
    assert built.max_transcript_chars == MAX_TRANSCRIPT_CHARS


@pytest.mark.parametrize(
    "variable",
    ["REQUEST_CEILING_S", "DRAIN_DEADLINE_S", "BODY_READ_DEADLINE_S", "HEADER_READ_DEADLINE_S"],
)
@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_non_finite_durations_are_refused(variable, value):
    with pytest.raises(SettingsError, match=variable):
        ServerSettings.build({variable: value})


# -- `tts-bench serve` where it cannot listen -------------------------------------


def _serve(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tts_bench", "serve", *flags],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'container'}"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_on_a_busy_port_is_one_line_and_exit_2():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        proc = _serve("--host", "127.0.0.1", "--port", str(busy.getsockname()[1]))

    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.count("\n") == 1 and "cannot listen" in proc.stderr


def test_serve_on_a_host_that_does_not_resolve_is_one_line_and_exit_2():
    proc = _serve("--host", "no-such-host.invalid", "--port", "0")

    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.count("\n") == 1 and "no-such-host.invalid" in proc.stderr
