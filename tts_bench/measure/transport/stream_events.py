"""The client side of the server's stream events (SPEC §3): one reader for every load path.

The server answers a request with newline-terminated JSON events: `chunk` (base64 audio),
optional `timestamps` / `phoneme_timestamps`, then `done`; a failure after streaming began
ends with `error`; a request the client cancelled on a WebSocket ends with `cancelled`. The
ladder's users, the surge's open loop, both T_total probes and the bidi-stream worker all read
them through `StreamReading`, so each reads a stream the same way:

- TTFAB is the arrival of the first `chunk` that carries audio;
- `done` ends the request `ok` (its `first_chunk_latency_ms` is the server's own service time);
- `error` ends it `error`, except a refusal (`queue_saturated`): that is the admission gate
  refusing the request, the same refusal as the HTTP 503 it answers before streaming begins, so
  it counts as `rejected` (a shed request, not a broken server) wherever it arrives;
- events of another `context_id` (a shared WebSocket) are skipped.

What those names are is an endpoint contract's business (`contract.EndpointContract`): its
`EventRules` say which events carry audio, which end the stream, and which statuses and errors
are refusals. `KOKORO_EVENTS`, this project's container, is every reader's default; Cartesia
Sonic-3 (`SONIC3_EVENTS`) refuses with HTTP 429 and sends no error events.

Only the standard library and the `telemetry` leaf are imported: the bidi-stream worker runs
this module under its own interpreter (`loadtest/bidi_worker.py`), which has no pydantic; the
contract validates `EventRules` as it stands here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from tts_bench.telemetry import QUEUE_SATURATED_ERROR

# The ladder's corpus asks for pcm_s16le (corpus.Utterance.request); bytes per sample by encoding.
BYTES_PER_SAMPLE = {"pcm_s16le": 2, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}


class Outcome(StrEnum):
    """How one request ended, as the client saw it."""

    OK = "ok"  # the stream ended with a `done` event
    REJECTED = "rejected"  # queue_saturated: the admission gate refused it (503 or error event)
    ERROR = "error"  # any other failure (HTTP error, error event, broken stream)
    CANCELLED = "cancelled"  # the load generator stopped it (end of a rung); load, not a result


@dataclass(frozen=True, slots=True)
class EventRules:
    """How one contract's stream events read, and which answers are refusals at capacity.

    Field names and event types are the contract's; every reader of this module applies them
    the same way. A refusal is a status in `refused_statuses` whose body holds `refused_marker`
    (None: the status alone says it), or an error event whose `error_field` is in
    `refused_errors`.
    """

    # pydantic (the contract's loader) reads this: a misspelt key is an error, not ignored.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    type_field: str = "type"
    audio_events: tuple[str, ...] = ("chunk",)
    data_field: str = "data"
    rate_field: str = "sampling_rate"
    ok_events: tuple[str, ...] = ("done",)
    error_events: tuple[str, ...] = ("error",)
    error_field: str = "error"
    refused_errors: tuple[str, ...] = (QUEUE_SATURATED_ERROR,)
    refused_statuses: tuple[int, ...] = (503,)
    refused_marker: str | None = QUEUE_SATURATED_ERROR
    cancelled_events: tuple[str, ...] = ("cancelled",)
    server_first_chunk_field: str | None = "first_chunk_latency_ms"
    bytes_per_sample: int = 2

    def refusal_outcome(self, status: int | None, error_text: str) -> Outcome:
        """The outcome of a request refused before its stream began: `rejected` when the
        status (and body) say the container is at capacity, `error` for anything else."""
        refused = status in self.refused_statuses and (
            self.refused_marker is None or self.refused_marker in error_text
        )
        return Outcome.REJECTED if refused else Outcome.ERROR


KOKORO_EVENTS = EventRules()
"""This project's container (SPEC §3): 503 + `queue_saturated`, before or inside the stream."""

SONIC3_EVENTS = EventRules(
    error_events=(),
    refused_errors=(),
    refused_statuses=(429,),
    refused_marker=None,
    cancelled_events=(),
    server_first_chunk_field=None,
)
"""Cartesia Sonic-3 on SageMaker (the second seed): 429 once its 4 generation slots are busy."""


def refusal_outcome(
    status: int | None, error_text: str, rules: EventRules = KOKORO_EVENTS
) -> Outcome:
    """`rules.refusal_outcome`, this project's container by default."""
    return rules.refusal_outcome(status, error_text)


def base64_size(data_b64: str) -> int:
    """Bytes a base64 string decodes to, from its length (no decoding: the client is hot)."""
    size = len(data_b64)
    if size % 4:
        raise ValueError(f"base64 length {size} is not a multiple of 4")
    padding = data_b64[-2:].count("=") if size else 0
    return size // 4 * 3 - padding


def base64_audio_seconds(
    data_b64: str, sampling_rate: int, encoding: str = "pcm_s16le", bytes_per_sample: int = 0
) -> float:
    """Duration of a base64 chunk of raw PCM, from its length (`bytes_per_sample`, when given,
    instead of the encoding's)."""
    if sampling_rate <= 0:
        raise ValueError(f"sampling_rate {sampling_rate}: must be positive")
    width = bytes_per_sample or BYTES_PER_SAMPLE[encoding]
    return base64_size(data_b64) / (width * sampling_rate)


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event as the client reads it."""

    kind: str  # chunk | done | error | cancelled | timestamps | phoneme_timestamps | ...
    audio_b64: str = ""  # a chunk's audio (empty for every other event)
    sampling_rate: int | None = None
    ends: Outcome | None = None  # how the request ended, when this event ends it
    detail: str = ""  # for `error`: "<status_code>: <error>"
    server_first_chunk_ms: float | None = None  # from `done`, when the server sent it


def parse_event(
    raw: bytes | str, context_id: str | None = None, rules: EventRules = KOKORO_EVENTS
) -> StreamEvent | None:
    """One event line; None when it belongs to another request than `context_id`."""
    event: Any = json.loads(raw)
    if not isinstance(event, dict):
        raise ValueError(f"a stream event is a JSON object, got {type(event).__name__}")
    return event_of(event, context_id, rules)


def event_of(
    event: Mapping[str, Any], context_id: str | None = None, rules: EventRules = KOKORO_EVENTS
) -> StreamEvent | None:
    """One event already decoded from JSON; None when it belongs to another request."""
    if context_id is not None and event.get("context_id") not in (None, context_id):
        return None
    kind = str(event.get(rules.type_field))
    if kind in rules.audio_events:
        data, rate = event.get(rules.data_field), event.get(rules.rate_field)
        return StreamEvent(
            kind,
            audio_b64=data if isinstance(data, str) else "",
            sampling_rate=rate if isinstance(rate, int) and rate > 0 else None,
        )
    if kind in rules.ok_events:
        field = rules.server_first_chunk_field
        server_ms = None if field is None else event.get(field)
        first = float(server_ms) if isinstance(server_ms, int | float) else None
        return StreamEvent(kind, ends=Outcome.OK, server_first_chunk_ms=first)
    if kind in rules.error_events:
        error = event.get(rules.error_field)
        refused = error in rules.refused_errors  # an admission gate: see the module's doc
        return StreamEvent(
            kind,
            ends=Outcome.REJECTED if refused else Outcome.ERROR,
            detail=f"{event.get('status_code')}: {error}",
        )
    if kind in rules.cancelled_events:
        return StreamEvent(kind, ends=Outcome.CANCELLED)
    return StreamEvent(kind)


class AudioSink(Protocol):
    """Where a reading sends each audio chunk's arrival (`measure.playback.PlaybackTracker`)."""

    def add(self, arrival_s: float, audio_s: float) -> None: ...


class StreamReading:
    """One request's stream, read event by event: TTFAB, how it ended, what audio arrived.

    `started` is the send time on `clock` (any clock: TTFAB is a difference on it, and chunk
    arrivals handed to `heard` are read on it). Feed each event line to `feed` until it says the
    stream is over; a failure outside the stream (an HTTP status, a broken connection) goes to
    `fail` or `refused`. `rules`: the endpoint contract's names for its events.
    """

    __slots__ = (
        "audio_bytes",
        "clock",
        "context_id",
        "detail",
        "heard",
        "outcome",
        "rules",
        "server_first_chunk_ms",
        "started",
        "ttfab_ms",
    )

    def __init__(
        self,
        context_id: str | None,
        clock: Callable[[], float] = time.perf_counter,
        started: float | None = None,
        heard: AudioSink | None = None,
        rules: EventRules = KOKORO_EVENTS,
    ) -> None:
        self.context_id = context_id
        self.rules = rules
        self.clock = clock
        self.started = clock() if started is None else started
        self.heard = heard
        self.ttfab_ms: float | None = None
        self.outcome: Outcome | None = None
        self.detail = ""
        self.server_first_chunk_ms: float | None = None
        self.audio_bytes = 0

    def feed(self, raw: bytes | str) -> bool:
        """Apply one event line; True when the stream is over (later lines change nothing)."""
        if self.outcome is not None:
            return True
        event = parse_event(raw, self.context_id, self.rules)
        return event is not None and self.apply(event)

    def apply(self, event: StreamEvent) -> bool:
        if event.audio_b64:
            now = self.clock()
            if self.ttfab_ms is None:
                self.ttfab_ms = (now - self.started) * 1000
            self.audio_bytes += base64_size(event.audio_b64)
            if self.heard is not None and event.sampling_rate:
                seconds = base64_audio_seconds(
                    event.audio_b64,
                    event.sampling_rate,
                    bytes_per_sample=self.rules.bytes_per_sample,
                )
                self.heard.add(now, seconds)
        if event.ends is None:
            return False
        self.outcome, self.detail = event.ends, event.detail
        if event.server_first_chunk_ms is not None:
            self.server_first_chunk_ms = event.server_first_chunk_ms
        return True

    def settle(self, outcome: Outcome, detail: str = "") -> None:
        """The request ended as `outcome`: read elsewhere (a worker that timed it), or stopped."""
        self.outcome, self.detail = outcome, detail

    def fail(self, detail: str, outcome: Outcome = Outcome.ERROR) -> None:
        self.settle(outcome, detail)

    def refused(self, status: int, body: str) -> None:
        """The server answered `status` instead of a stream (`body`: its first bytes)."""
        self.fail(f"HTTP {status}: {body}", self.rules.refusal_outcome(status, body))

    def end(self) -> Outcome:
        """The outcome once reading stopped: a stream cut before its end is an error."""
        if self.outcome is None:
            self.fail("stream ended without a done event")
        return self.outcome  # type: ignore[return-value]

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK
