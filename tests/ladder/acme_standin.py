"""A third vendor's container, invented for tests (issue 39: "a third contract ... with no code
change"): a wire unlike Kokoro's and Sonic-3's, served as a command the local cloud starts.

Request: `{"request_id", "text", "speaker", "format": {"codec": "pcm_s16le", "rate": N}}`.
Stream: newline-ended JSON, `{"event": "metadata"}` first (no audio), then `{"event": "audio",
"audio_b64", "rate"}` per 20 ms of a tone at a fixed real-time factor, then `{"event": "eos"}`.
At capacity (`--slots`, 2 by default) it answers 503 `{"code": "overloaded"}` at once. Its
`/ping` is SageMaker's health check and nothing more: 200, empty body.

    python tests/ladder/acme_standin.py [--port N] [--rtf 0.2] [--slots 2]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os

from aiohttp import web

ACTIVE = web.AppKey("active", list)
SLOTS = web.AppKey("slots", int)
RTF = web.AppKey("rtf", float)
CHUNK_S = 0.02
SECONDS_PER_CHAR = 0.02


def line(**fields: object) -> bytes:
    return (json.dumps(fields) + "\n").encode()


async def invocations(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    fmt = body.get("format") or {}
    if not (
        isinstance(body.get("text"), str) and body["text"] and isinstance(fmt.get("rate"), int)
    ):
        return web.json_response({"code": "bad_request"}, status=400)
    active = request.app[ACTIVE]
    if len(active) >= request.app[SLOTS]:
        return web.json_response({"code": "overloaded"}, status=503)
    active.append(body.get("request_id"))
    try:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        await response.write(line(event="metadata", request_id=body.get("request_id")))
        rate = fmt["rate"]
        per_chunk = int(rate * CHUNK_S)
        chunks = max(1, int(len(body["text"]) * SECONDS_PER_CHAR / CHUNK_S))
        silence = base64.b64encode(bytes(2 * per_chunk)).decode()
        for _ in range(chunks):
            await asyncio.sleep(CHUNK_S * request.app[RTF])
            await response.write(line(event="audio", audio_b64=silence, rate=rate))
        await response.write(line(event="eos"))
        await response.write_eof()
        return response
    except ConnectionResetError:
        return web.Response(status=499)
    finally:
        active.remove(body.get("request_id"))


async def ping(_request: web.Request) -> web.Response:
    return web.Response(status=200)


def main() -> None:
    parser = argparse.ArgumentParser(description="A third vendor's stand-in (tests only).")
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("SAGEMAKER_BIND_TO_PORT", 8080))
    )
    parser.add_argument("--rtf", type=float, default=0.2)
    parser.add_argument("--slots", type=int, default=2)
    args = parser.parse_args()
    app = web.Application()
    app[ACTIVE], app[SLOTS], app[RTF] = [], args.slots, args.rtf
    app.router.add_get("/ping", ping)
    app.router.add_post("/invocations", invocations)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
