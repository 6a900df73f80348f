"""The admission gate of a real server with MAX_QUEUE_DEPTH=2, over HTTP and the WebSocket."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest

from tests.server.server_client import LONG_TEXT, StreamResult, post_stream, speech_request

pytestmark = pytest.mark.slow

DEPTH = 2


async def _in_flight(session: aiohttp.ClientSession, base: str) -> int:
    async with session.get(f"{base}/ping") as resp:
        return (await resp.json())["in_flight"]


async def _wait_in_flight(
    session: aiohttp.ClientSession, base: str, value: int, timeout: float
) -> int:
    deadline = time.monotonic() + timeout
    seen = await _in_flight(session, base)
    while seen != value and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        seen = await _in_flight(session, base)
    return seen


def test_k_plus_m_concurrent_requests_get_exactly_m_refusals_before_any_admitted_one_ends(
    bounded_server,
):
    m = 3

    async def scenario() -> list[StreamResult]:
        async with aiohttp.ClientSession() as session:
            assert await _wait_in_flight(session, bounded_server.base, 0, timeout=30) == 0
            return await asyncio.gather(
                *(
                    post_stream(
                        session,
                        bounded_server.base,
                        speech_request(f"sat-{i}", "Hello there. Fine."),
                    )
                    for i in range(DEPTH + m)
                )
            )

    results = asyncio.run(scenario())

    refused = [r for r in results if r.status == 503]
    admitted = [r for r in results if r.status == 200]
    assert len(refused) == m and len(admitted) == DEPTH
    for refusal in refused:
        assert refusal.body["error"] == "queue_saturated"
        assert refusal.body["queue_max_depth"] == DEPTH
        assert refusal.body["in_flight"] == DEPTH
        assert (
            isinstance(refusal.body["retry_after_ms"], int) and refusal.body["retry_after_ms"] > 0
        )
    assert all(r.events[-1]["type"] == "done" for r in admitted)
    assert max(r.finished_at for r in refused) < min(r.finished_at for r in admitted)
    saturated = [r for r in bounded_server.records if "QueueSaturated" in r]
    assert len(saturated) >= m and all(r["QueueSaturated"] == 1.0 for r in saturated)


def test_a_client_that_disconnects_mid_stream_frees_its_slot(bounded_server):
    base = bounded_server.base

    async def first_line(session: aiohttp.ClientSession, context_id: str) -> aiohttp.ClientResponse:
        resp = await session.post(f"{base}/invocations", json=speech_request(context_id, LONG_TEXT))
        assert resp.status == 200
        assert json.loads(await resp.content.readline())["type"] == "chunk"
        return resp

    async def scenario() -> tuple[int, int, int, int]:
        # One connection per session so closing a response really closes its socket.
        sessions = [
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))
            for _ in range(4)
        ]
        try:
            assert await _wait_in_flight(sessions[3], base, 0, timeout=30) == 0
            leaving = await first_line(sessions[0], "leaving")
            staying = await first_line(sessions[1], "staying")
            while_full = await post_stream(sessions[2], base, speech_request("while-full", "Hi."))
            leaving.close()  # mid-stream: many sentences still to come, one being synthesised
            after_leave = await _wait_in_flight(sessions[3], base, DEPTH - 1, timeout=10)
            next_one = await first_line(sessions[2], "next")
            in_flight_with_next = await _in_flight(sessions[3], base)
            next_one.close()
            staying.close()
            settled = await _wait_in_flight(sessions[3], base, 0, timeout=10)
            return while_full.status, after_leave, in_flight_with_next, settled
        finally:
            for session in sessions:
                await session.close()

    while_full, after_leave, with_next, settled = asyncio.run(scenario())

    assert while_full == 503
    assert after_leave == DEPTH - 1
    assert with_next == DEPTH
    assert settled == 0
    gone = bounded_server.wait_for(
        lambda r: r.get("msg") == "generation_end" and r["request_id"].endswith("-leaving"),
        timeout=10,
    )
    assert gone["outcome"] == "cancelled"


def test_websocket_generations_are_gated_past_the_bound(bounded_server):
    base = bounded_server.base

    async def scenario() -> dict[str, list[dict[str, Any]]]:
        by_context: dict[str, list[dict[str, Any]]] = {}
        async with aiohttp.ClientSession() as session:
            assert await _wait_in_flight(session, base, 0, timeout=30) == 0
            async with session.ws_connect(f"{base}/invocations-bidirectional-stream") as ws:
                for i in range(DEPTH + 1):
                    await ws.send_str(json.dumps(speech_request(f"ws-{i}", LONG_TEXT)))
                while not (
                    by_context.get(f"ws-{DEPTH}")
                    and all(by_context.get(f"ws-{i}") for i in range(DEPTH))
                ):
                    event = json.loads((await ws.receive(timeout=60)).data)
                    by_context.setdefault(event["context_id"], []).append(event)
                for i in range(DEPTH):
                    await ws.send_str(json.dumps({"type": "cancel", "context_id": f"ws-{i}"}))
                cancelled = 0
                while cancelled < DEPTH:
                    event = json.loads((await ws.receive(timeout=60)).data)
                    by_context[event["context_id"]].append(event)
                    cancelled += event["type"] == "cancelled"
            assert await _wait_in_flight(session, base, 0, timeout=10) == 0
        return by_context

    events = asyncio.run(scenario())

    (refusal,) = events[f"ws-{DEPTH}"]
    assert refusal["type"] == "error" and refusal["status_code"] == 503
    assert refusal["error"] == "queue_saturated" and refusal["retry_after_ms"] > 0
    assert refusal["done"] is True
    for i in range(DEPTH):
        assert events[f"ws-{i}"][0]["type"] == "chunk"
        assert events[f"ws-{i}"][-1]["type"] == "cancelled"
