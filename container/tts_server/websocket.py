"""The WebSocket `/invocations-bidirectional-stream` (SageMaker bidirectional streaming).

Each client text message is one request (or a cancel); several contexts run at once in one
session, each admitted by the gate on its own, their events interleaved as text messages.
RFC 6455 pings are answered by aiohttp's autoping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import WSMsgType, web

from tts_server.admission import Refusal, Ticket
from tts_server.app_state import GATE, LOG, SETTINGS, STATE, Generation
from tts_server.generation import count_refusal, not_ready_body, run_generation
from tts_server.logs import new_request_id
from tts_server.protocol import (
    FieldProblem,
    TtsRequest,
    decode_json,
    error_event,
    invalid_request_body,
    parse_request,
)


class _WsSink:
    """Sends events as text messages; contexts interleave event by event."""

    def __init__(
        self, ws: web.WebSocketResponse, lock: asyncio.Lock, context_id: str | None
    ) -> None:
        self._ws, self._lock, self._context_id = ws, lock, context_id

    async def send(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            async with self._lock:
                await self._ws.send_str(
                    json.dumps(event, separators=(",", ":"), ensure_ascii=False)
                )

    async def fail(self, status: int, error: str, message: str, **details: Any) -> None:
        if not self._ws.closed:
            await self.send(
                [error_event(self._context_id, status, error, message=message, **details)]
            )


class _WsSession:
    """One WebSocket: its running contexts, each a task holding its own admission ticket."""

    def __init__(self, app: web.Application, ws: web.WebSocketResponse) -> None:
        self.app, self.ws = app, ws
        self.lock = asyncio.Lock()
        self.contexts: dict[str, asyncio.Task[None]] = {}

    def sink(self, context_id: str | None) -> _WsSink:
        return _WsSink(self.ws, self.lock, context_id)

    async def handle(self, text: str) -> None:
        app = self.app
        settings, state, gate, log = app[SETTINGS], app[STATE], app[GATE], app[LOG]
        arrival = asyncio.get_running_loop().time()
        data, problems = decode_json(text.encode())
        context_id = data.get("context_id") if isinstance(data, dict) else None
        context_id = context_id if isinstance(context_id, str) else None
        if isinstance(data, dict) and data.get("type") == "cancel":
            await self._cancel(data, context_id)
            return
        if (body := not_ready_body(app)) is not None:
            await self.sink(context_id).fail(503, body.pop("error"), body.pop("message"), **body)
            return
        parsed: TtsRequest | None = None
        if not problems and state.engine is not None:
            parsed, problems = parse_request(data, state.engine, settings.max_transcript_chars)
        if parsed is not None and parsed.context_id in self.contexts:
            problems = [FieldProblem("context_id", "is already running in this session")]
        if problems or parsed is None:
            body = invalid_request_body(problems)
            await self.sink(context_id).fail(
                422, body["error"], body["message"], errors=body["errors"]
            )
            return
        ticket = gate.admit()
        if isinstance(ticket, Refusal):
            body = count_refusal(app, ticket)
            log.event("refused", reason=ticket.value, in_flight=gate.in_flight, transport="ws")
            await self.sink(parsed.context_id).fail(
                503, body.pop("error"), body.pop("message"), **body
            )
            return
        generation = Generation(parsed, new_request_id(parsed.context_id), arrival)
        task = asyncio.create_task(self._run(generation, ticket, gate.in_flight))
        self.contexts[parsed.context_id] = task

    async def _run(self, generation: Generation, ticket: Ticket, in_flight: int) -> None:
        try:
            await run_generation(
                self.app, generation, self.sink(generation.request.context_id), in_flight
            )
        except ConnectionResetError as exc:  # the socket closed under us
            self.app[LOG].event("client_gone", request_id=generation.request_id, error=str(exc))
        finally:
            ticket.release()
            self.contexts.pop(generation.request.context_id, None)

    async def _cancel(self, data: dict[str, Any], context_id: str | None) -> None:
        extra = sorted(set(data) - {"type", "context_id"})
        if context_id is None or extra:
            problems = [
                FieldProblem("context_id", "a cancel names the context_id (a string) to stop")
            ]
            problems += [FieldProblem(name, "is not a field of a cancel message") for name in extra]
            body = invalid_request_body(problems)
            await self.sink(context_id).fail(
                422, body["error"], body["message"], errors=body["errors"]
            )
            return
        task = self.contexts.pop(context_id, None)
        if task is None:
            await self.sink(context_id).fail(404, "unknown_context", "no such context is running")
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self.sink(context_id).send(
            [{"type": "cancelled", "context_id": context_id, "done": True, "status_code": 200}]
        )

    async def close(self) -> None:
        tasks = list(self.contexts.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def bidirectional_stream(request: web.Request) -> web.StreamResponse:
    app = request.app
    if (body := not_ready_body(app)) is not None:
        return web.json_response(body, status=503)
    # autoping answers RFC 6455 pings; a message larger than a body is refused like one.
    ws = web.WebSocketResponse(autoping=True, max_msg_size=app[SETTINGS].max_body_bytes)
    await ws.prepare(request)
    session = _WsSession(app, ws)
    app[STATE].sockets.add(ws)
    try:
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await session.handle(message.data)
            elif message.type is WSMsgType.BINARY:
                await session.sink(None).fail(
                    422, "invalid_request", "body: send each request as a JSON text message"
                )
    finally:
        app[STATE].sockets.discard(ws)
        await session.close()
    return ws
