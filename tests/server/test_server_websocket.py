"""The bidirectional-streaming WebSocket of a real server: interleaved contexts, cancel, pings."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from tests.server.server_client import ENGLISH, LONG_TEXT, speech_request

pytestmark = pytest.mark.slow

PATH = "/invocations-bidirectional-stream"


def test_one_session_carries_two_interleaved_contexts_and_a_cancel(server):
    async def scenario() -> tuple[bytes, list[dict[str, Any]]]:
        received: list[dict[str, Any]] = []
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{server.base}{PATH}", autoping=False) as ws,
        ):
            await ws.ping(b"are you there")
            pong = await ws.receive(timeout=10)
            assert pong.type is aiohttp.WSMsgType.PONG
            await ws.send_str(json.dumps(speech_request("first", ENGLISH)))
            await ws.send_str(json.dumps(speech_request("second", "Hello there.")))
            await ws.send_str(json.dumps(speech_request("doomed", LONG_TEXT)))
            finished: set[str] = set()
            cancel_sent = False
            while finished != {"first", "second", "doomed"}:
                message = await ws.receive(timeout=120)
                event = json.loads(message.data)
                received.append(event)
                if event["context_id"] == "doomed" and event["type"] == "chunk" and not cancel_sent:
                    await ws.send_str(json.dumps({"type": "cancel", "context_id": "doomed"}))
                    cancel_sent = True
                if event["done"]:
                    finished.add(event["context_id"])
        return pong.data, received

    pong, events = asyncio.run(scenario())

    assert pong == b"are you there"
    by_context = {
        cid: [e for e in events if e["context_id"] == cid] for cid in ("first", "second", "doomed")
    }
    for cid in ("first", "second"):
        # The server's own FirstChunkLatency rides on the done event (the batching alarm).
        assert by_context[cid][-1].pop("first_chunk_latency_ms") >= 0
        assert by_context[cid][-1] == {
            "type": "done",
            "context_id": cid,
            "done": True,
            "status_code": 200,
        }
        assert {e["type"] for e in by_context[cid][:-1]} == {"chunk"}
    # Interleaved: the second context streams while the first is still going.
    positions = {
        cid: [i for i, e in enumerate(events) if e["context_id"] == cid] for cid in by_context
    }
    assert positions["second"][0] < positions["first"][-1]
    assert by_context["doomed"][-1]["type"] == "cancelled"
    assert not any(e["type"] == "done" for e in by_context["doomed"])
    chunks_of_doomed = [e for e in by_context["doomed"] if e["type"] == "chunk"]
    assert 0 < len(chunks_of_doomed) < 50 * 59  # it stopped long before 59 sentences of audio


def test_malformed_messages_get_error_events_and_the_session_goes_on(server):
    async def scenario() -> list[dict[str, Any]]:
        replies = []
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{server.base}{PATH}") as ws,
        ):
            await ws.send_str("{not json")
            replies.append(json.loads((await ws.receive(timeout=10)).data))
            await ws.send_str(json.dumps(speech_request("w-bad", language="xx")))
            replies.append(json.loads((await ws.receive(timeout=10)).data))
            await ws.send_str(json.dumps({"type": "cancel", "context_id": "nothing-running"}))
            replies.append(json.loads((await ws.receive(timeout=10)).data))
            await ws.send_str(json.dumps(speech_request("w-ok", "Fine.")))
            while True:
                event = json.loads((await ws.receive(timeout=60)).data)
                if event["done"]:
                    replies.append(event)
                    break
        return replies

    not_json, bad_language, unknown_cancel, ok = asyncio.run(scenario())

    assert not_json["type"] == "error" and not_json["status_code"] == 422
    assert [e["field"] for e in not_json["errors"]] == ["body"]
    assert bad_language["context_id"] == "w-bad" and bad_language["status_code"] == 422
    assert [e["field"] for e in bad_language["errors"]] == ["language"]
    assert unknown_cancel["type"] == "error" and unknown_cancel["status_code"] == 404
    assert ok.pop("first_chunk_latency_ms") >= 0
    assert ok == {"type": "done", "context_id": "w-ok", "done": True, "status_code": 200}
