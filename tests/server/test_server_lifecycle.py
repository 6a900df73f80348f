"""Start-up, the invocation ceiling and SIGTERM, each on a fresh real server process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tts_server.settings import ServerSettings

from tests.server.server_client import post_stream, speech_request
from tts_bench.telemetry import STARTUP_MARKERS

pytestmark = pytest.mark.slow

# One sentence, no break: the engine makes it as one segment, which takes far longer than a
# 0.3 s ceiling on a CPU.
ONE_LONG_SENTENCE = (
    "This single sentence goes on without a full stop, telling of a river that winds through "
    "hills and valleys and old towns"
)


async def _ping(session: aiohttp.ClientSession, base: str) -> tuple[int, dict[str, Any]]:
    async with session.get(f"{base}/ping") as resp:
        return resp.status, await resp.json()


def test_ping_is_503_while_loading_then_200_with_the_fingerprint_and_markers_in_order(start_server):
    server = start_server({"REQUEST_CEILING_S": "0.3"})

    async def scenario() -> tuple[tuple[int, dict], tuple[int, dict]]:
        async with aiohttp.ClientSession() as session:
            early = await _ping(session, server.base)  # right after the server listens
            await asyncio.to_thread(server.wait_ready)
            return early, await _ping(session, server.base)

    (early_status, early), (ready_status, ready) = asyncio.run(scenario())

    assert early_status == 503 and early["status"] == "loading" and early["ready"] is False
    assert ready_status == 200 and ready["status"] == "ready" and ready["ready"] is True
    assert ready["queue_max_depth"] is None and ready["in_flight"] == 0
    fingerprint = ready["fingerprint"]
    assert fingerprint["model"] == "kokoro-82m"
    assert fingerprint["instance_type"].startswith("local-")
    assert (
        fingerprint["image_digest"].startswith("sha256:") and len(fingerprint["image_digest"]) == 71
    )
    assert fingerprint["performance_env"]["ENGINE_BACKEND"] == "onnx"
    assert "transport" not in fingerprint
    markers = [r["marker"] for r in server.records if r.get("msg") == "startup_marker"]
    assert tuple(markers) == STARTUP_MARKERS
    stamps = [r["ts"] for r in server.records if r.get("msg") == "startup_marker"]
    assert stamps == sorted(stamps)

    # The same fresh server, with its ceiling made small: the 408 path.
    async def past_the_ceiling() -> Any:
        async with aiohttp.ClientSession() as session:
            late = await post_stream(
                session, server.base, speech_request("late", ONE_LONG_SENTENCE)
            )
            return late, await _ping(session, server.base)

    late, (status_after, _) = asyncio.run(past_the_ceiling())
    if late.status == 200:  # the first chunk beat the ceiling: the stream ends with an error event
        assert late.events[-1]["type"] == "error" and late.events[-1]["status_code"] == 408
    else:
        assert late.status == 408 and late.body["error"] == "deadline_exceeded"
    assert not any(e["type"] == "done" for e in late.events)
    assert status_after == 200


# Nearly as many short sentences as one request may hold: about 260 s of audio, 90 s of a quiet
# 2-core machine's time, so no machine makes it all within the drain deadline below.
LONGEST_TEXT = " ".join(f"This is sentence {i}." for i in range(1, 185))
# A short request admitted before SIGTERM must finish within it while the long one competes: on
# a loaded CI machine (2 cores, other servers) that took over 12 s, so 10 s was too little.
DRAIN_DEADLINE_S = 20


def test_sigterm_drains_in_flight_work_and_ends_late_streams_with_an_error_event(start_server):
    assert len(LONGEST_TEXT) <= ServerSettings().max_transcript_chars
    server = start_server({"DRAIN_DEADLINE_S": str(DRAIN_DEADLINE_S)})
    server.wait_ready()
    base = server.base

    async def scenario() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            long_resp = await session.post(
                f"{base}/invocations", json=speech_request("long", LONGEST_TEXT)
            )
            assert json.loads(await long_resp.content.readline())["type"] == "chunk"
            short = asyncio.create_task(post_stream(session, base, speech_request("short", "Hi.")))
            while (await _ping(session, base))[1]["in_flight"] < 2:
                await asyncio.sleep(0.02)
            before = await _ping(session, base)
            server.terminate()
            await asyncio.to_thread(server.wait_for, lambda r: r.get("msg") == "draining", 10)
            during = await _ping(session, base)
            refused = await post_stream(session, base, speech_request("too-late", "Hi."))
            short_result = await short
            long_events = [json.loads(line) async for line in long_resp.content if line.strip()]
            return {
                "before": before,
                "during": during,
                "refused": refused,
                "short": short_result,
                "long": long_events,
            }

    outcome = asyncio.run(scenario())
    code = server.proc.wait(timeout=30)  # SageMaker's SIGKILL comes 30 s after SIGTERM

    assert outcome["before"][0] == 200
    assert outcome["during"][0] == 503 and outcome["during"][1]["status"] == "draining"
    assert outcome["refused"].status == 503
    assert outcome["short"].status == 200 and outcome["short"].events[-1]["type"] == "done"
    last = outcome["long"][-1]
    assert last["type"] == "error" and last["status_code"] == 503 and last["done"] is True
    assert last["context_id"] == "long"
    assert code == 0
    assert any(r.get("msg") == "drain_deadline" for r in server.records)


def test_python_m_tts_server_refuses_bad_settings_with_one_line():
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "tts_server", "--port", "0"],
        cwd=repo,
        env={"PYTHONPATH": f"{repo}{os.pathsep}{repo / 'container'}", "MAX_QUEUE_DEPTH": "zero"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert proc.returncode == 2
    assert "MAX_QUEUE_DEPTH" in proc.stderr and "Traceback" not in proc.stderr


def test_tts_bench_serve_listens_and_answers_ping_before_the_weights_load():
    repo = Path(__file__).resolve().parents[2]
    # The `serve` subcommand module exactly as `tts-bench` registers it.
    program = (
        "import argparse, sys\n"
        "from tts_bench.cli.local import serve\n"
        "parser = argparse.ArgumentParser(prog='tts-bench')\n"
        "serve.register(parser.add_subparsers(dest='command'))\n"
        "args = parser.parse_args(sys.argv[1:])\n"
        "sys.exit(args.handler(args))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", program, "serve", "--port", "0"],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{repo / 'container'}"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        records = []
        for line in proc.stdout:
            records.append(json.loads(line))
            if records[-1].get("msg") == "listening":
                break
        port = records[-1]["port"]

        async def ping() -> tuple[int, dict[str, Any]]:
            async with aiohttp.ClientSession() as session:
                return await _ping(session, f"http://127.0.0.1:{port}")

        status, body = asyncio.run(ping())
        proc.terminate()
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert records[0]["marker"] == "container_started"
    assert status == 503 and body["status"] == "loading"
    assert code == 0
