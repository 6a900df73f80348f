"""`POST /invocations`: strict input, the admission gate, a stream of JSON lines.

Order of checks: ready, body size by header (413), the gate (503 at once), the body read with
a bound (413), content type and schema (422 naming every bad field), then the generation.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from tts_server.admission import Refusal, Ticket
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

    def __init__(self, request: web.Request, context_id: str) -> None:
        self._request = request
        self._context_id = context_id
        self.response: web.StreamResponse | None = None

    async def send(self, events: list[dict[str, Any]]) -> None:
        if self.response is None:
            self.response = web.StreamResponse(
                status=200, headers={"Content-Type": "application/jsonlines"}
            )
            await self.response.prepare(self._request)
        await self.response.write(b"".join(encode_line(e) for e in events))

    async def fail(self, status: int, error: str, message: str) -> None:
        if self.response is None:
            self.response = web.json_response({"error": error, "message": message}, status=status)
            return
        await self.response.write(
            encode_line(error_event(self._context_id, status, error, message=message))
        )


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


async def invocations(request: web.Request) -> web.StreamResponse:
    app = request.app
    settings, gate, log = app[SETTINGS], app[GATE], app[LOG]
    arrival = asyncio.get_running_loop().time()
    if (body := not_ready_body(app)) is not None:
        return web.json_response(body, status=503)
    if request.content_length is not None and request.content_length > settings.max_body_bytes:
        return _too_large(settings.max_body_bytes)
    ticket = gate.admit()
    if isinstance(ticket, Refusal):
        body = count_refusal(app, ticket)
        log.event("refused", reason=ticket.value, in_flight=gate.in_flight)
        return web.json_response(body, status=503)
    try:
        return await _serve_http(request, ticket, arrival)
    finally:
        ticket.release()


async def _serve_http(request: web.Request, ticket: Ticket, arrival: float) -> web.StreamResponse:
    app = request.app
    settings, state, log = app[SETTINGS], app[STATE], app[LOG]
    in_flight_at_arrival = app[GATE].in_flight
    raw = await _read_body(request, settings.max_body_bytes)
    if raw is None:
        return _too_large(settings.max_body_bytes)
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
    sink = _HttpSink(request, parsed.context_id)
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
        await sink.response.write_eof()
    return sink.response
