"""The engine in a process of its own (`ENGINE_PROCESS=1`): the same contract, the same audio.

The design exists for the GPU (kernel launches never wait on the HTTP front's interpreter
lock), but it runs on the CPU too, so it is tested here: the real server with the real
offline weights, the model in a child process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.server.server_client import LONG_TEXT, decode_audio, post_stream, speech_request

pytestmark = pytest.mark.slow

PROCESS = {"ENGINE_PROCESS": "1"}


def _engine_pid(server: Any) -> int:
    """The engine child's pid, from /proc (the server's only child process, started by
    whichever of its threads loaded the engine)."""
    pids = [
        int(pid)
        for children in Path(f"/proc/{server.proc.pid}/task").glob("*/children")
        for pid in children.read_text().split()
    ]
    assert len(pids) == 1, pids
    return pids[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


async def _ping(session: aiohttp.ClientSession, base: str) -> tuple[int, dict[str, Any]]:
    async with session.get(f"{base}/ping") as resp:
        return resp.status, await resp.json()


def test_the_same_audio_as_in_process_and_a_group_sigterm_still_drains(start_server, server):
    engine_server = start_server({**PROCESS, "DRAIN_DEADLINE_S": "10"})
    assert engine_server.listening_after_s < 5  # the socket opens before anything heavy
    engine_server.wait_ready()
    child = _engine_pid(engine_server)

    async def scenario() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            ping = await _ping(session, engine_server.base)
            ours = await post_stream(session, engine_server.base, speech_request("p"))
            theirs = await post_stream(session, server.base, speech_request("p"))
            # A request in flight, then SIGTERM to the child and the server both (as a kill of
            # their process group sends it): the child must outlive the drain.
            response = await session.post(
                f"{engine_server.base}/invocations", json=speech_request("late")
            )
            first = await response.content.readline()
            os.kill(child, signal.SIGTERM)
            os.kill(engine_server.proc.pid, signal.SIGTERM)
            rest = [line async for line in response.content if line.strip()]
            return {"ping": ping, "ours": ours, "theirs": theirs, "late": [first, *rest]}

    outcome = asyncio.run(scenario())
    code = engine_server.proc.wait(timeout=30)

    status, body = outcome["ping"]
    assert status == 200 and body["fingerprint"]["performance_env"]["ENGINE_PROCESS"] == "1"
    ours, theirs = outcome["ours"], outcome["theirs"]
    assert ours.status == theirs.status == 200
    assert (decode_audio(ours.of_type("chunk"), "pcm_s16le") == decode_audio(
        theirs.of_type("chunk"), "pcm_s16le")).all()  # fmt: skip
    assert ours.events[-1]["type"] == "done"
    assert b'"type":"done"' in outcome["late"][-1]
    assert code == 0
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_an_engine_process_that_dies_ends_its_streams_and_the_server_exits(start_server):
    engine_server = start_server(PROCESS)
    engine_server.wait_ready()
    child = _engine_pid(engine_server)

    async def killed_mid_stream() -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as session:
            response = await session.post(
                f"{engine_server.base}/invocations", json=speech_request("cut", LONG_TEXT)
            )
            events = [json.loads(await response.content.readline())]
            os.kill(child, signal.SIGKILL)
            with contextlib.suppress(aiohttp.ClientPayloadError):  # the server left mid-stream
                async for line in response.content:
                    if line.strip():
                        events.append(json.loads(line))
            return events

    events = asyncio.run(killed_mid_stream())
    code = engine_server.proc.wait(timeout=30)
    failed = engine_server.wait_for(lambda r: r.get("msg") == "engine_failed", timeout=1)

    assert events[0]["type"] == "chunk"
    assert not any(e["type"] == "done" for e in events)
    assert all(e["status_code"] == 500 for e in events if e["type"] == "error")
    assert code == 1
    assert "engine process exited" in failed["error"]
