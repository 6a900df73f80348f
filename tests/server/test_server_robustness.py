"""Hostile input against a real server: each kind is refused in one line and the server serves on.

One server for the module, with MAX_QUEUE_DEPTH=1 (so a slot held by a slow client shows at
once) and one-second body and header deadlines (so the tests wait seconds, not minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import WSCloseCode

from tests.server.server_client import LONG_TEXT, StreamResult, post_stream, speech_request
from tests.servers import ServerProcess

pytestmark = pytest.mark.slow

DEADLINE_S = 1.0
WS = "/invocations-bidirectional-stream"
BODY_LIMIT = 64 * 1024  # the default MAX_BODY_BYTES


@pytest.fixture(scope="module")
def tight_server() -> Iterator[ServerProcess]:
    process = ServerProcess(
        {
            "MAX_QUEUE_DEPTH": "1",
            "BODY_READ_DEADLINE_S": str(DEADLINE_S),
            "HEADER_READ_DEADLINE_S": str(DEADLINE_S),
        }
    )
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def post(server: ServerProcess, body: Any = None, **kwargs: Any) -> StreamResult:
    async def go() -> StreamResult:
        async with aiohttp.ClientSession() as session:
            return await post_stream(session, server.base, body, **kwargs)

    return asyncio.run(go())


def error_lines(server: ServerProcess) -> list[dict[str, Any]]:
    return [r for r in server.records if r.get("level") == "error" or "exc" in r]


def not_json_lines(server: ServerProcess) -> list[dict[str, Any]]:
    return [r for r in server.records if r.get("msg") == "__not_json__"]


def raw_exchange(server: ServerProcess, data: bytes, wait_s: float) -> tuple[bytes, float]:
    """Send `data` on a fresh connection, then read until the server closes it (or `wait_s`)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(data)
        sock.settimeout(wait_s)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except TimeoutError:
            pass
    return received, time.monotonic() - started


# -- lone surrogates -----------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"transcript": "Hello \ud800 there."}, "transcript"),
        ({"context_id": "ctx-\udfff"}, "context_id"),
        ({"voice": {"mode": "id", "id": "jf_\ud83d"}}, "voice.id"),
        ({"language": "e\udc00"}, "language"),
    ],
)
def test_a_lone_surrogate_in_any_string_field_is_a_422_naming_it(tight_server, overrides, field):
    body = {**speech_request("surrogate"), **overrides}
    # json.dumps escapes a lone surrogate as \udXXX: valid JSON, not valid Unicode.
    result = post(tight_server, raw=json.dumps(body).encode())

    assert result.status == 422
    assert field in [e["field"] for e in result.body["errors"]]
    assert not_json_lines(tight_server) == [] and error_lines(tight_server) == []


# -- the slot is not held by a client that never finishes its body -------------


def test_a_half_sent_body_holds_no_slot_and_gets_a_408_at_its_deadline(tight_server):
    head = (
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 500\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", tight_server.port)) as slow:
        slow.sendall(head + b'{"context_id": "slow", "trans')
        time.sleep(0.2)
        # MAX_QUEUE_DEPTH=1: had the half-sent request taken the slot, this would be a 503.
        served = post(tight_server, speech_request("after-slow", "Hi."))
        slow.settimeout(DEADLINE_S + 10)
        answer = slow.recv(4096)

    assert served.status == 200 and served.events[-1]["type"] == "done"
    assert answer.startswith(b"HTTP/1.1 408")


# -- slow clients: a head begun must be finished within the header deadline ---------------


def test_a_half_sent_request_head_is_answered_408_and_closed_at_its_deadline(tight_server):
    received, elapsed = raw_exchange(
        tight_server, b"POST /invocations HTTP/1.1\r\nHost: x\r\nX-Slow: ", wait_s=DEADLINE_S + 10
    )

    assert received.startswith(b"HTTP/1.1 408")
    assert elapsed < DEADLINE_S + 5
    # and the server still serves
    assert post(tight_server, speech_request("after-slow-head", "Hi.")).status == 200


# -- the effective speed (tag x request) is checked ------------------------------


def test_a_speed_tag_times_the_request_speed_outside_the_range_is_a_422(tight_server):
    body = speech_request(
        "slowest", "Hi <speed ratio='0.25'/> there.", generation_config={"speed": 0.25}
    )
    result = post(tight_server, body)

    assert result.status == 422
    assert [e["field"] for e in result.body["errors"]] == ["transcript"]
    assert "0.0625" in result.body["message"]


# -- a huge integer -------------------------------------------------------------


def test_an_integer_of_5000_digits_is_a_422_on_http(tight_server):
    raw = json.dumps(speech_request("huge")).encode()[:-1] + b', "x": ' + b"9" * 5000 + b"}"
    result = post(tight_server, raw=raw)

    assert result.status == 422
    assert [e["field"] for e in result.body["errors"]] == ["body"]
    assert error_lines(tight_server) == []


async def _stream_until(ws: aiohttp.ClientWebSocketResponse, done: set[str]) -> list[dict]:
    """Events until every context in `done` has ended (done or error) or the socket closes."""
    events: list[dict[str, Any]] = []
    ended: set[str] = set()
    while not done <= ended:
        message = await ws.receive(timeout=120)
        if message.type is not aiohttp.WSMsgType.TEXT:
            events.append({"type": "__closed__", "code": ws.close_code})
            break
        event = json.loads(message.data)
        events.append(event)
        if event["done"] and event.get("context_id") in done:
            ended.add(event["context_id"])
    return events


def test_a_huge_integer_on_the_websocket_is_an_error_event_and_the_session_goes_on(tight_server):
    async def scenario() -> list[dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{tight_server.base}{WS}") as ws,
        ):
            await ws.send_str(json.dumps(speech_request("streaming", "Hello there. Bye now.")))
            first = json.loads((await ws.receive(timeout=60)).data)
            await ws.send_str('{"context_id": "huge", "x": ' + "7" * 5000 + "}")
            return [first, *await _stream_until(ws, {"streaming"})]

    events = asyncio.run(scenario())

    refusals = [e for e in events if e["type"] == "error"]
    assert [(e["status_code"], e["errors"][0]["field"]) for e in refusals] == [(422, "body")]
    assert events[-1]["type"] == "done" and events[-1]["context_id"] == "streaming"


# -- a WebSocket message over the body limit -----------------------------------


def test_a_message_over_the_body_limit_is_refused_alone(tight_server):
    async def scenario() -> list[dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{tight_server.base}{WS}") as ws,
        ):
            await ws.send_str(json.dumps(speech_request("running", "Hello there. Bye now.")))
            await ws.send_str(json.dumps(speech_request("big", "a" * (BODY_LIMIT + 10))))
            return await _stream_until(ws, {"running"})

    events = asyncio.run(scenario())

    refused = [e for e in events if e["type"] == "error"]
    assert [(e["status_code"], e["error"]) for e in refused] == [(413, "body_too_large")]
    assert events[-1]["type"] == "done" and events[-1]["context_id"] == "running"


def test_a_session_closed_for_a_giant_message_ends_its_running_contexts_with_an_error(
    tight_server,
):
    async def scenario() -> list[dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{tight_server.base}{WS}", max_msg_size=0) as ws,
        ):
            await ws.send_str(json.dumps(speech_request("doomed", LONG_TEXT)))
            first = json.loads((await ws.receive(timeout=60)).data)
            # The client keeps reading while it sends, as a streaming client does: one that
            # stops reading fills the socket, and the server's 2 s notice cannot reach it.
            events = asyncio.create_task(_stream_until(ws, {"doomed"}))
            # Past the server's hard cap (16 bodies): the server closes while this is sent.
            with contextlib.suppress(ConnectionError):
                await ws.send_str(json.dumps(speech_request("giant", "a" * (17 * BODY_LIMIT))))
            return [first, *await events]

    events = asyncio.run(scenario())

    doomed = [e for e in events if e.get("context_id") == "doomed"]
    assert doomed[0]["type"] == "chunk"
    # The doomed context ends with its error event when the client is still there to read the
    # server's 2 s notice. A client whose own send of the giant message broke on the closing
    # socket is gone first (about a third of runs here: it sees an abnormal closure, 1006) or
    # reads only the close (1009); either way the session ends and nothing hangs.
    last = events[-1]
    if last["type"] == "__closed__":
        assert last["code"] in (WSCloseCode.ABNORMAL_CLOSURE, WSCloseCode.MESSAGE_TOO_BIG), last
        assert doomed[-1]["type"] == "chunk"
    else:
        assert doomed[-1]["type"] == "error" and doomed[-1]["done"] is True
        assert doomed[-1]["status_code"] == 413 and doomed[-1]["error"] == "session_closing"


# -- nothing to say ---------------------------------------------------------------


@pytest.mark.parametrize("transcript", ["\u200b\u200b\u200b", "\u200b\u2060\ufeff\u200e\u200f"])
def test_a_transcript_of_only_zero_width_characters_is_a_422(tight_server, transcript):
    result = post(tight_server, speech_request("silent", transcript))

    assert result.status == 422
    assert [e["field"] for e in result.body["errors"]] == ["transcript"]
    assert "nothing to say" in result.body["message"]


# -- a malformed HTTP request is a warning without a traceback -------------------


def test_a_malformed_http_request_logs_one_warning_line_without_a_traceback(tight_server):
    received, _ = raw_exchange(
        tight_server,
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        wait_s=5,
    )

    assert received.startswith(b"HTTP/1.0 400") or received.startswith(b"HTTP/1.1 400")
    line = tight_server.wait_for(lambda r: "malformed HTTP request" in r.get("msg", ""), 10)
    assert line["level"] == "warning" and "exc" not in line
    assert "Content-Length" in line["msg"]
    assert error_lines(tight_server) == []
