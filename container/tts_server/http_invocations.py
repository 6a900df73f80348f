"""`POST /invocations`: strict input, the admission gate, a stream of JSON lines.

Order of checks: ready, body size by header (413), the body read with a size bound (413) and
its own short deadline (408), the gate (503 at once), content type and schema (422 naming
every bad field), then the generation.

The body is read before admission so that a client that sends part of a body and then
nothing holds no slot; and everything after admission is bounded by the request ceiling (plus
a grace to write the 408), so a client that stops reading its response cannot hold a slot
either: past that bound its connection is dropped and the slot freed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from aiohttp.web_exceptions import HTTPException
from aiohttp.web_protocol import RequestPayloadError

from tts_server.admission import Refusal
from tts_server.app_state import GATE, LOG, SETTINGS, STATE, Generation
from tts_server.generation import count_refusal, not_ready_body, run_generation
from tts_server.logs import new_request_id
from tts_server.protocol import (
    FieldProblem,
    TtsRequest,
    decode_json,
    encode_line,
    error_event,
    invalid_request_body,
    parse_request,
)


class _HttpSink:
    """Prepares the stream at the first event, so failures before it are plain HTTP errors."""

    def __init__(
        self, request: web.Request, context_id: str, held: list[web.StreamResponse]
    ) -> None:
        self._request = request
        self._context_id = context_id
        self._held = held  # the prepared response, for the handler to return if time runs out
        self.response: web.StreamResponse | None = None

    async def send(self, texts: list[str]) -> None:
        if self.response is None:
            self.response = web.StreamResponse(
                status=200, headers={"Content-Type": "application/jsonlines"}
            )
            self._held.append(self.response)
            await self.response.prepare(self._request)
        # One write per batch: the texts are one segment's events, JSON already.
        await self.response.write(("\n".join(texts) + "\n").encode() if texts else b"")

    async def fail(self, status: int, error: str, message: str, **details: Any) -> None:
        if self.response is None:
            self.response = web.json_response(
                {"error": error, "message": message, **details}, status=status
            )
            return
        await self.response.write(
            encode_line(error_event(self._context_id, status, error, message=message, **details))
        )


# After the request ceiling, this long to write the 408 event and end the stream.
WRITE_GRACE_S = 2.0


async def _read_body(request: web.Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed `limit` (never read whole)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> web.Response:
    response = web.json_response(
        {
            "error": "body_too_large",
            "message": f"body: the request body exceeds {limit} bytes",
            "errors": [{"field": "body", "message": f"exceeds {limit} bytes"}],
        },
        status=413,
    )
    response.force_close()  # the rest of the body is never read
    return response


def _body_too_slow(deadline_s: float) -> web.Response:
    response = web.json_response(
        {
            "error": "body_timeout",
            "message": f"body: the request body did not arrive within {deadline_s:g} s",
            "errors": [{"field": "body", "message": f"did not arrive within {deadline_s:g} s"}],
        },
        status=408,
    )
    response.force_close()
    return response


def _unreadable_body(reason: str) -> web.Response:
    response = web.json_response(
        {
            "error": "invalid_request",
            "message": f"body: could not be read ({reason})",
            "errors": [{"field": "body", "message": f"could not be read ({reason})"}],
        },
        status=400,
    )
    response.force_close()
    return response


async def invocations(request: web.Request) -> web.StreamResponse:
    app = request.app
    settings, gate, log = app[SETTINGS], app[GATE], app[LOG]
    arrival = asyncio.get_running_loop().time()
    if (body := not_ready_body(app)) is not None:
        return web.json_response(body, status=503)
    if request.content_length is not None and request.content_length > settings.max_body_bytes:
        return _too_large(settings.max_body_bytes)
    try:
        async with asyncio.timeout(settings.body_read_deadline_s):
            raw = await _read_body(request, settings.max_body_bytes)
    except TimeoutError:
        log.event("body_timeout", level="warning", deadline_s=settings.body_read_deadline_s)
        return _body_too_slow(settings.body_read_deadline_s)
    except (RequestPayloadError, HTTPException) as exc:  # a broken chunked or encoded body
        log.event("unreadable_body", level="warning", error=str(exc)[:300])
        return _unreadable_body(" ".join(str(exc).split())[:200])
    if raw is None:
        return _too_large(settings.max_body_bytes)
    ticket = gate.admit()
    if isinstance(ticket, Refusal):
        body = count_refusal(app, ticket)
        log.event("refused", reason=ticket.value, in_flight=gate.in_flight)
        return web.json_response(body, status=503)
    held: list[web.StreamResponse] = []
    try:
        async with asyncio.timeout_at(arrival + settings.request_ceiling_s + WRITE_GRACE_S):
            return await _serve_http(request, raw, arrival, held)
    except TimeoutError:
        # Even the 408 could not be written in time: the client stopped reading. Drop the
        # connection so nothing more waits on it; the slot frees below.
        log.event("client_stopped_reading", level="warning")
        if request.transport is not None:
            request.transport.abort()
        return held[0] if held else web.Response(status=408)
    finally:
        ticket.release()


async def _serve_http(
    request: web.Request, raw: bytes, arrival: float, held: list[web.StreamResponse]
) -> web.StreamResponse:
    app = request.app
    settings, state, log = app[SETTINGS], app[STATE], app[LOG]
    in_flight_at_arrival = app[GATE].in_flight
    problems: list[FieldProblem] = []
    if request.content_type != "application/json":
        problems.append(
            FieldProblem("content-type", f"is {request.content_type!r}; send application/json")
        )
    data, body_problems = decode_json(raw)
    parsed: TtsRequest | None = None
    if not body_problems and state.engine is not None:
        parsed, body_problems = parse_request(data, state.engine, settings.max_transcript_chars)
    problems.extend(body_problems)
    context_id = data.get("context_id") if isinstance(data, dict) else None
    request_id = new_request_id(context_id if isinstance(context_id, str) else None)
    if problems or parsed is None:
        log.event("invalid_request", request_id=request_id, errors=[p.as_json() for p in problems])
        return web.json_response(invalid_request_body(problems), status=422)
    generation = Generation(parsed, request_id, arrival)
    sink = _HttpSink(request, parsed.context_id, held)
    try:
        await run_generation(app, generation, sink, in_flight_at_arrival)
    except asyncio.CancelledError:
        log.event("client_gone", request_id=request_id)
        raise
    except ConnectionResetError:  # a write found the socket closed before the cancel came
        log.event("client_gone", request_id=request_id)
        return sink.response or web.Response(status=499)
    if sink.response is None:  # pragma: no cover - run_generation always sends or fails
        raise web.HTTPInternalServerError()
    if sink.response.prepared:
        try:
            await sink.response.write_eof()
        except ConnectionResetError:  # it read its done event and left before the last chunk
            log.event("client_gone", request_id=request_id)
    return sink.response
