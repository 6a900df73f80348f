"""The one event reader under Sonic-3's contract (issue 39): audio, ends and refusals by rule."""

from __future__ import annotations

import base64
import json

import pytest
from botocore.exceptions import ClientError

from tts_bench.measure.transport.response_stream import failure_of
from tts_bench.measure.transport.stream_events import (
    KOKORO_EVENTS,
    SONIC3_EVENTS,
    Outcome,
    StreamReading,
    refusal_outcome,
)

RATE = 44100
CHUNK = base64.b64encode(b"\x00\x01" * int(RATE * 0.02)).decode()  # 20 ms of 16-bit PCM


def line(**event: object) -> bytes:
    return (json.dumps({"context_id": "c", **event}) + "\n").encode()


def sonic3_chunk(data: str = CHUNK) -> bytes:
    return line(type="chunk", status_code=206, done=False, data=data, sampling_rate=RATE,
                step_time=0.004)  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Heard:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def add(self, arrival_s: float, audio_s: float) -> None:
        self.seconds.append(audio_s)


def test_ttfab_is_the_first_chunk_carrying_audio_not_a_timestamps_event() -> None:
    clock, heard = Clock(), Heard()
    reading = StreamReading("c", clock=clock, heard=heard, rules=SONIC3_EVENTS)
    clock.now = 0.010
    assert not reading.feed(line(type="timestamps", status_code=206, done=False,
                                 word_timestamps={"words": ["Hi"], "start": [0], "end": [0.1]}))  # fmt: skip
    clock.now = 0.020
    assert not reading.feed(sonic3_chunk(data=""))  # a chunk without audio bytes is no audio
    assert reading.ttfab_ms is None
    clock.now = 0.030
    assert not reading.feed(sonic3_chunk())
    clock.now = 0.050
    assert not reading.feed(sonic3_chunk())
    assert not reading.feed(line(type="phoneme_timestamps", status_code=206, done=True,
                                 phoneme_timestamps={}))  # fmt: skip
    assert reading.feed(line(type="done", done=True, status_code=200))
    assert reading.end() is Outcome.OK
    assert reading.ttfab_ms == pytest.approx(30.0)
    assert heard.seconds == [pytest.approx(0.02)] * 2  # 16-bit, at the event's own rate
    assert reading.server_first_chunk_ms is None


def test_a_stream_without_done_is_an_error_under_sonic3() -> None:
    reading = StreamReading("c", rules=SONIC3_EVENTS)
    reading.feed(sonic3_chunk())
    assert reading.end() is Outcome.ERROR


@pytest.mark.parametrize(
    ("rules", "status", "body", "outcome"),
    [
        (SONIC3_EVENTS, 429, '{"message": "no capacity"}', Outcome.REJECTED),
        (SONIC3_EVENTS, 429, "", Outcome.REJECTED),
        (SONIC3_EVENTS, 503, '{"error": "queue_saturated"}', Outcome.ERROR),
        (SONIC3_EVENTS, 422, '{"message": "transcript"}', Outcome.ERROR),
        (KOKORO_EVENTS, 429, "", Outcome.ERROR),
        (KOKORO_EVENTS, 503, '{"error": "queue_saturated"}', Outcome.REJECTED),
    ],
)
def test_refusals_are_the_contracts(rules, status, body, outcome) -> None:
    reading = StreamReading("c", rules=rules)
    reading.refused(status, body)
    assert reading.end() is outcome
    assert refusal_outcome(status, body, rules) is outcome


def test_an_error_event_named_queue_saturated_is_no_refusal_under_sonic3() -> None:
    event = line(type="error", status_code=503, error="queue_saturated")
    kokoro, sonic3 = StreamReading("c"), StreamReading("c", rules=SONIC3_EVENTS)
    assert kokoro.feed(event) and kokoro.end() is Outcome.REJECTED
    # Sonic-3 publishes no error event: an unknown event changes nothing, the cut stream errs.
    assert not sonic3.feed(event) and sonic3.end() is Outcome.ERROR


def model_error(original_status: int, message: str) -> ClientError:
    response = {
        "Error": {"Code": "ModelError", "Message": "Received client error"},
        "OriginalStatusCode": original_status,
        "OriginalMessage": message,
    }
    return ClientError(response, "InvokeEndpointWithResponseStream")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "sonic3", "kokoro"),
    [(429, Outcome.REJECTED, Outcome.ERROR), (422, Outcome.ERROR, Outcome.ERROR)],
)
def test_a_model_errors_original_status_code_is_read_by_contract(status, sonic3, kokoro) -> None:
    exc = model_error(status, '{"message": "no capacity"}')
    detail, outcome = failure_of(exc, SONIC3_EVENTS)  # type: ignore[misc]
    assert outcome is sonic3 and f"(container {status})" in detail
    assert failure_of(exc)[1] is kokoro  # type: ignore[index]
