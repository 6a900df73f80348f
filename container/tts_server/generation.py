"""One generation, whatever the transport: engine segments in, protocol events out.

`run_generation` streams an utterance into an `EventSink` (the HTTP stream or a WebSocket)
under its deadline scope, ends it with a done event or an error (an HTTP status before the
first byte, an error event after), and emits its EMF metrics. Resampling, encoding, base64
and the events' JSON run on worker threads, never on the event loop: the loop only writes a
segment's ready text (at the engine's peak that is tens of thousands of 20 ms events a second,
which one loop could not also serialize; `benchmarks/serving_path_bench.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from tts_bench.telemetry import FIRST_CHUNK_LATENCY, IN_FLIGHT, QUEUE_SATURATED, QUEUE_WAIT
from tts_server.admission import Refusal, retry_after_ms
from tts_server.app_state import GATE, LOG, SETTINGS, STATE, Generation, Phase
from tts_server.audio_format import encoded_chunks_b64
from tts_server.emf import emf_record
from tts_server.engine.base import Engine, EngineError, RequestRejected, Segment
from tts_server.protocol import (
    TtsRequest,
    chunk_event_texts,
    done_event,
    event_text,
    phoneme_timestamps_event,
    word_timestamps_event,
)

NOTHING_TO_SAY_FIELD = {
    "field": "transcript",
    "message": "nothing to say: no word in it could be spoken; send some text to speak",
}
NOTHING_TO_SAY = f"transcript: {NOTHING_TO_SAY_FIELD['message']}"


class EventSink(Protocol):
    """Where a generation's events go: an HTTP stream or a WebSocket. Events arrive as their
    JSON text (`protocol.event_text`), serialized on a worker thread, not on the event loop."""

    async def send(self, texts: list[str]) -> None: ...

    async def fail(self, status: int, error: str, message: str, **details: Any) -> None: ...


def _segment_events(
    segment: Segment, request: TtsRequest, step_time: float, src_rate: int
) -> list[str]:
    """The texts of one segment's chunk events (≤ 20 ms each), then of its timestamp events
    when asked for per segment. Runs on a worker thread: resampling, encoding, base64 and
    JSON are CPU work, and the event loop only writes what this returns."""
    fmt, cid = request.output_format, request.context_id
    chunks = encoded_chunks_b64(segment.audio, src_rate, fmt.sample_rate, fmt.encoding)
    texts = chunk_event_texts(cid, chunks, fmt.sample_rate, step_time)
    if not request.use_normalized_timestamps:
        texts.extend(event_text(e) for e in _timestamp_events(request, [segment], None))
    return texts


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


@dataclass
class _Progress:
    """One generation as it goes: where its service time starts, what it has streamed, how it
    ended (read by the end-of-generation log line whatever happened)."""

    work_start: float
    first_chunk_ms: float | None = None
    segments: list[Segment] = field(default_factory=list)
    outcome: str = "failed"


async def run_generation(
    app: web.Application, generation: Generation, sink: EventSink, in_flight_at_arrival: int
) -> None:
    """Stream one utterance into `sink`; ends with a done event, or an error (event or HTTP)."""
    settings, state, log = app[SETTINGS], app[STATE], app[LOG]
    engine = state.engine
    if engine is None:
        raise EngineError("the engine is not loaded")
    progress = _Progress(work_start=asyncio.get_running_loop().time())
    state.generations.add(generation)
    try:
        async with asyncio.timeout_at(generation.arrival + settings.request_ceiling_s) as scope:
            generation.scope = scope
            await _stream(app, engine, generation, sink, in_flight_at_arrival, progress)
    except TimeoutError:
        if generation.drained:
            progress.outcome = "drained"
            await sink.fail(503, "shutting_down", "the server is shutting down; retry elsewhere")
        else:
            progress.outcome = "deadline_exceeded"
            await sink.fail(
                408,
                "deadline_exceeded",
                f"the request could not finish within {settings.request_ceiling_s:g} s of arrival",
            )
    except RequestRejected as exc:  # check() passed, synthesize disagreed: still the input's fault
        progress.outcome = "rejected"
        await sink.fail(
            422,
            "invalid_request",
            str(exc),
            errors=[{"field": p.field, "message": p.message} for p in exc.problems],
        )
    except EngineError as exc:
        progress.outcome = "engine_error"
        log.event("engine_error", level="error", request_id=generation.request_id, error=str(exc))
        await sink.fail(500, "engine_error", str(exc))
    except asyncio.CancelledError:
        progress.outcome = "cancelled"
        raise
    except ConnectionResetError:
        progress.outcome = "client_gone"
        raise
    finally:
        state.generations.discard(generation)
        _generation_end(app, generation, progress, in_flight_at_arrival)


async def _stream(
    app: web.Application,
    engine: Engine,
    generation: Generation,
    sink: EventSink,
    in_flight_at_arrival: int,
    progress: _Progress,
) -> None:
    """The engine's segments as events into `sink`, then the tail and the done event."""
    request, loop = generation.request, asyncio.get_running_loop()
    previous = progress.work_start
    segments = progress.segments
    async with contextlib.aclosing(engine.synthesize(request.synthesis_request())) as stream:
        async for segment in stream:
            now = loop.time()
            texts = await asyncio.to_thread(
                _segment_events, segment, request, now - previous, engine.sample_rate
            )
            previous = now
            if not segments and segment.work_started is not None:
                # Queued until the model began the first segment (the engine's own
                # queue included): service time is counted from there (SPEC §3).
                progress.work_start = segment.work_started
            segments.append(segment)
            await sink.send(texts)
            if progress.first_chunk_ms is None and texts:
                progress.first_chunk_ms = (loop.time() - progress.work_start) * 1000
                _emit_work_metrics(
                    app, generation, progress.work_start, progress.first_chunk_ms,
                    in_flight_at_arrival,
                )  # fmt: skip
    if not segments:
        # G2P found nothing speakable (only symbols, emoji): no audio is no answer.
        progress.outcome = "rejected"
        await sink.fail(422, "invalid_request", NOTHING_TO_SAY, errors=[NOTHING_TO_SAY_FIELD])
        return
    tail: list[dict[str, Any]] = []
    if request.use_normalized_timestamps and segments:
        # Normalized times need the whole utterance's length: sent once, at the end.
        duration = max(s.start_s + s.duration_s for s in segments)
        tail = _timestamp_events(request, segments, duration if duration > 0 else None)
    await sink.send(
        [event_text(e) for e in (*tail, done_event(request.context_id, progress.first_chunk_ms))]
    )
    progress.outcome = "done"


def _generation_end(
    app: web.Application, generation: Generation, progress: _Progress, in_flight_at_arrival: int
) -> None:
    """The generation's end: its latency observed when it was served, its metrics when none
    were emitted at its first chunk, and one log line whatever happened."""
    elapsed = asyncio.get_running_loop().time() - generation.arrival
    if progress.outcome == "done":
        app[STATE].recent.observe(elapsed)
    first_chunk_ms = progress.first_chunk_ms
    if first_chunk_ms is None:
        _emit_work_metrics(app, generation, progress.work_start, None, in_flight_at_arrival)
    app[LOG].event(
        "generation_end",
        request_id=generation.request_id,
        outcome=progress.outcome,
        seconds=round(elapsed, 4),
        first_chunk_ms=None if first_chunk_ms is None else round(first_chunk_ms, 2),
        audio_s=round(sum(s.duration_s for s in progress.segments), 4),
        segments=len(progress.segments),
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
    emit_metrics(app, metrics, request_id=generation.request_id)


def emit_metrics(app: web.Application, metrics: dict[str, float], **properties: Any) -> None:
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


def count_refusal(app: web.Application, refusal: Refusal) -> dict[str, Any]:
    """Count a refusal (a QueueSaturated EMF line when the gate is full) and build its body."""
    settings, state, gate = app[SETTINGS], app[STATE], app[GATE]
    hint = retry_after_ms(state.recent.mean_s, gate.in_flight)
    if refusal is Refusal.SATURATED:
        emit_metrics(app, {QUEUE_SATURATED: 1, IN_FLIGHT: gate.in_flight})
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


def not_ready_body(app: web.Application) -> dict[str, Any] | None:
    phase = app[STATE].phase
    if phase is Phase.READY:
        return None
    error = "not_ready" if phase is Phase.LOADING else "draining"
    return {
        "error": error,
        "message": f"the server is {phase.value}; retry later",
        "retry_after_ms": 1000,
    }
