"""Property-based fuzzing of the whole request space, over `/invocations` and the WebSocket.

Bodies come from the request model's JSON schema, then are mutated (`request_space`).
Invariants: never a 5xx (status or event), every stream ends with done or an error event,
a valid request is served, a WebSocket session is never dropped (every message gets its
answer on a session that stays open), and afterwards the server still serves and has logged
no error line and no line that is not JSON.

The session's plain server (`tests/conftest.py`); what it logged is read from where the log
stood when this module began. CI runs FUZZ_EXAMPLES (default 20) examples per transport: a
valid request costs a synthesis, seconds on a shared 2-core machine. A longer run is one
command (see docs/container.md):

    FUZZ_EXAMPLES=2000 python -m pytest tests/server/test_server_fuzz.py -q
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tts_server.engine import create_engine

from tests.server.request_space import Body, hostile_bodies
from tests.server.server_client import speech_request
from tests.servers import ServerProcess

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "20"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,  # each run explores afresh; a failure prints its example to replay
)
VOICES = sorted(create_engine().voices)  # not loaded: the voice names need no weights
WS = "/invocations-bidirectional-stream"
PROBE = "fuzz-probe"
CONTENT_TYPES = ["application/json"] * 6 + ["text/plain", "application/json; charset=latin-1"]


@dataclass(frozen=True)
class Fuzzed:
    """The session's plain server, and where its log stood when this module began."""

    server: ServerProcess
    log_from: int

    @property
    def base(self) -> str:
        return self.server.base

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.server.records[self.log_from :]


@pytest.fixture(scope="module")
def fuzz_server(server: ServerProcess) -> Fuzzed:
    return Fuzzed(server, server.mark())


class Loop:
    """One event loop and HTTP session for the module's examples (cheap per example)."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.session: aiohttp.ClientSession = self.runner.run(self._session())

    @staticmethod
    async def _session() -> aiohttp.ClientSession:
        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))

    def run(self, coroutine: Any) -> Any:
        return self.runner.run(coroutine)

    def close(self) -> None:
        self.runner.run(self.session.close())
        self.runner.close()


@pytest.fixture(scope="module")
def loop() -> Iterator[Loop]:
    shared = Loop()
    yield shared
    shared.close()


def check_events(events: list[dict[str, Any]], context_id: str | None) -> None:
    """A stream: chunks and timestamps, then exactly one terminal event, never a 5xx."""
    assert events, "an empty 200 stream"
    assert all(e["status_code"] < 500 for e in events), events[-1]
    assert all(e.get("context_id") == context_id for e in events)
    *body, last = events
    assert last["done"] is True and last["type"] in ("done", "error"), last
    assert all(e["done"] is False and e["type"] != "done" for e in body)


# -- POST /invocations -----------------------------------------------------------------------


async def _post(session: aiohttp.ClientSession, base: str, data: bytes, ctype: str) -> tuple:
    async with session.post(
        f"{base}/invocations", data=data, headers={"Content-Type": ctype}
    ) as resp:
        raw = await resp.read()
        return resp.status, resp.headers.get("Content-Type", ""), raw


@FUZZ
@given(body=hostile_bodies(VOICES), ctype=st.sampled_from(CONTENT_TYPES))
def test_http_never_answers_5xx_and_streams_end_properly(fuzz_server, loop, body: Body, ctype):
    status, _, raw = loop.run(_post(loop.session, fuzz_server.base, body.encode(), ctype))

    assert status < 500, raw[:500]
    if body.must_serve and ctype == "application/json":
        assert status == 200, raw[:500]
    if status == 200:
        events = [json.loads(line) for line in raw.splitlines() if line.strip()]
        sent = json.loads(body.text)
        check_events(events, sent["context_id"])
        if body.must_serve:
            assert events[-1]["type"] == "done"
    else:
        answer = json.loads(raw)
        assert isinstance(answer.get("error"), str) and answer.get("message"), answer


# -- the WebSocket ---------------------------------------------------------------------------


async def _ws_exchange(session: aiohttp.ClientSession, base: str, text: str) -> dict[str, Any]:
    """Send one message and a probe (a cancel of nothing, answered 404 at once). Messages of
    a session are handled in order, so the message's refusal, if any, comes before the
    probe's answer; a message with no refusal by then started a context, whose events are
    then read to its end. The session must stay open throughout."""
    async with session.ws_connect(f"{base}{WS}", max_msg_size=0) as ws:
        await ws.send_str(text)
        await ws.send_str(json.dumps({"type": "cancel", "context_id": PROBE}))
        events: list[dict[str, Any]] = []
        probe: dict[str, Any] | None = None
        running: set[str] = set()
        while probe is None or running:
            message = await ws.receive(timeout=120)
            assert message.type is aiohttp.WSMsgType.TEXT, (message.type, message.data, events)
            event = json.loads(message.data)
            if event.get("context_id") == PROBE and event["type"] == "error":
                probe = event
                refused = any(e["type"] == "error" for e in events)
                if not refused and not events:
                    running.add("__pending__")  # accepted: its events are still to come
                continue
            events.append(event)
            cid = event.get("context_id")
            running.discard("__pending__")
            if event["done"]:
                running.discard(cid)
            elif isinstance(cid, str):
                running.add(cid)
        return {"events": events, "probe": probe, "open": not ws.closed}


@FUZZ
@given(body=hostile_bodies(VOICES))
def test_websocket_answers_every_message_and_never_drops_the_session(fuzz_server, loop, body: Body):
    text = body.text.encode("utf-8", "replace").decode("utf-8")  # a text frame is UTF-8
    result = loop.run(_ws_exchange(loop.session, fuzz_server.base, text))

    events, probe = result["events"], result["probe"]
    assert result["open"]
    assert probe["status_code"] == 404, probe
    assert events, "the message got no answer"
    assert all(e["status_code"] < 500 for e in events), events
    if body.must_serve:
        check_events(events, json.loads(body.text)["context_id"])
        assert events[-1]["type"] == "done"
    if events[-1]["type"] == "error":
        assert events[-1]["done"] is True and events[-1].get("message")


# -- afterwards ------------------------------------------------------------------------------


def test_after_the_fuzzing_the_server_still_serves_and_logged_no_error(fuzz_server, loop):
    async def check() -> tuple[int, int, list[dict[str, Any]]]:
        async with loop.session.get(f"{fuzz_server.base}/ping") as resp:
            ping = resp.status
        data = json.dumps(speech_request("after-fuzz", "Hello there.")).encode()
        status, _, raw = await _post(loop.session, fuzz_server.base, data, "application/json")
        events = [json.loads(line) for line in raw.splitlines() if line.strip()]
        return ping, status, events

    ping, status, events = loop.run(check())

    assert ping == 200 and status == 200 and events[-1]["type"] == "done"
    records = fuzz_server.records
    assert [r for r in records if r.get("msg") == "__not_json__"] == []
    assert [r for r in records if r.get("level") == "error" or "exc" in r] == []
