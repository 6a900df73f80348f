"""The WebSocket `/invocations-bidirectional-stream` (SageMaker bidirectional streaming).

Each client text message is one request (or a cancel); several contexts run at once in one
session, each admitted by the gate on its own, their events interleaved as text messages.
RFC 6455 pings are answered by aiohttp's autoping.

A bad message gets an error event and the session goes on: that includes a message larger
than a request body (413), which is refused alone. Only a message beyond a hard cap (many
bodies' worth, so memory stays bounded) makes aiohttp close the session; before any close,
every context still running ends with an error event, so none is dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from tts_server.admission import Refusal, Ticket
from tts_server.app_state import GATE, LOG, SETTINGS, STATE, Generation
from tts_server.generation import count_refusal, not_ready_body, run_generation
from tts_server.logs import new_request_id
from tts_server.protocol import (
    FieldProblem,
    TtsRequest,
    decode_json,
    error_event,
    event_text,
    invalid_request_body,
    parse_request,
)

# aiohttp closes the session on a message larger than this many request bodies; anything
# between one body and this is refused alone with a 413 error event.
HARD_MESSAGE_BODIES = 16
# Why a session closes → the status its unfinished contexts end with.
_CLOSE_STATUS = {1009: 413, 1001: 503}
# How long the closing session may spend telling its contexts (a client that stopped
# reading must not hold the close).
_CLOSE_NOTICE_S = 2.0


class _WsSink:
    """Sends events as text messages; contexts interleave event by event."""

    def __init__(
        self, ws: web.WebSocketResponse, lock: asyncio.Lock, context_id: str | None
    ) -> None:
        self._ws, self._lock, self._context_id = ws, lock, context_id

    async def send(self, texts: list[str]) -> None:
        for text in texts:
            async with self._lock:
                await self._ws.send_str(text)

    async def fail(self, status: int, error: str, message: str, **details: Any) -> None:
        if not self._ws.closed:
            await self.send(
                [
                    event_text(
                        error_event(self._context_id, status, error, message=message, **details)
                    )
                ]
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
            [
                event_text(
                    {
                        "type": "cancelled",
                        "context_id": context_id,
                        "done": True,
                        "status_code": 200,
                    }
                )
            ]
        )

    async def end_contexts(self, code: int) -> None:
        """End every running context with an error event, before the socket closes."""
        if not self.contexts:
            return
        running = dict(self.contexts)
        self.contexts.clear()
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        status = _CLOSE_STATUS.get(code, 400)
        with contextlib.suppress(Exception):  # the client may be gone already
            async with asyncio.timeout(_CLOSE_NOTICE_S):
                for context_id in running:
                    await self.sink(context_id).fail(
                        status,
                        "session_closing",
                        f"the session is closing (WebSocket close code {code}) before this "
                        "context finished",
                    )

    async def close(self) -> None:
        tasks = list(self.contexts.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _SessionSocket(web.WebSocketResponse):
    """A WebSocketResponse that lets its session end running contexts with an error event
    before any close: aiohttp's own (a message beyond the hard cap, a protocol error), the
    server's at shutdown, or the client's."""

    session: _WsSession | None = None

    async def close(
        self, *, code: int = WSCloseCode.OK, message: bytes = b"", drain: bool = True
    ) -> bool:
        session, self.session = self.session, None
        if session is not None and not self.closed:
            await session.end_contexts(code)
        return await super().close(code=code, message=message, drain=drain)


async def _handle_message(session: _WsSession, text: str, limit: int) -> None:
    """One client message; whatever it holds, the session goes on."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        await session.sink(None).fail(
            413,
            "body_too_large",
            f"body: the message is {size} bytes; at most {limit} are accepted",
            errors=[{"field": "body", "message": f"exceeds {limit} bytes"}],
        )
        return
    try:
        await session.handle(text)
    except ConnectionResetError:
        raise
    except Exception as exc:  # a bug: report it on this message, keep the session
        session.app[LOG].event("ws_message_failed", level="error", error=repr(exc)[:500])
        await session.sink(None).fail(500, "internal_error", "the server failed on this message")


async def bidirectional_stream(request: web.Request) -> web.StreamResponse:
    app = request.app
    if (body := not_ready_body(app)) is not None:
        return web.json_response(body, status=503)
    limit = app[SETTINGS].max_body_bytes
    # autoping answers RFC 6455 pings; a message larger than a body is refused like one (413).
    ws = _SessionSocket(autoping=True, max_msg_size=HARD_MESSAGE_BODIES * limit)
    await ws.prepare(request)
    session = _WsSession(app, ws)
    ws.session = session
    app[STATE].sockets.add(ws)
    try:
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await _handle_message(session, message.data, limit)
            elif message.type is WSMsgType.BINARY:
                await session.sink(None).fail(
                    422, "invalid_request", "body: send each request as a JSON text message"
                )
    finally:
        app[STATE].sockets.discard(ws)
        await session.close()
    return ws
