"""The AWS SDK's HTTP/2 client (real, in .venv-http2) through the bridge to a real container.

The bridge is given its own `open_session` here: the test's stand-in for the cloud's routing
yields a real `python -m tts_server`'s WebSocket URL (the session's plain server, onnx) and
counts the sessions in flight, as the contract asks of the cloud.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import websocket

from tests.servers import ServerProcess
from tts_bench.local_cloud.data_plane.bidi_bridge import BidiBridge
from tts_bench.local_cloud.data_plane.bidi_session import SessionLease
from tts_bench.local_cloud.data_plane.tls import LocalTls, make_local_tls
from tts_bench.local_cloud.errors import NoInstanceError
from tts_bench.measure.transport.bidi_stream import BidiWorker, BidiWorkerError
from tts_bench.serving.local_server import LocalServer

pytestmark = pytest.mark.slow

WS_PATH = "/invocations-bidirectional-stream"
SERVER_ARGS = ("--backend", "onnx")
READY_TIMEOUT_S = 240.0
TURN_TIMEOUT_S = 120.0
LONG_TEXT = " ".join(["The quick brown fox jumps over the lazy dog."] * 4)


def speech_request(context_id: str, transcript: str) -> dict[str, Any]:
    return {
        "context_id": context_id,
        "transcript": transcript,
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }


class Routing:
    """Endpoint name → an instance's ws:// URL; sessions counted while open, and requests on
    them while served (`serving`; `began` in all), through the lease's hooks (the cloud's job)."""

    def __init__(self) -> None:
        self.urls: dict[str, str] = {}
        self.in_flight: Counter[str] = Counter()
        self.opened: Counter[str] = Counter()
        self.serving: Counter[str] = Counter()
        self.began: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, endpoint: str, change: int) -> None:
        with self._lock:
            self.serving[endpoint] += change
            self.began[endpoint] += max(change, 0)

    @contextmanager
    def open_session(self, endpoint: str) -> Iterator[SessionLease]:
        url = self.urls.get(endpoint)
        if url is None:
            raise NoInstanceError(f"endpoint {endpoint} has no InService instance")
        with self._lock:
            self.in_flight[endpoint] += 1
            self.opened[endpoint] += 1
        try:
            yield SessionLease(
                url,
                request_began=lambda: self._count(endpoint, 1),
                request_ended=lambda: self._count(endpoint, -1),
            )
        finally:
            with self._lock:
                self.in_flight[endpoint] -= 1


def ws_url(server: LocalServer | ServerProcess) -> str:
    return f"ws://127.0.0.1:{server.port}{WS_PATH}"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> LocalTls:
    return make_local_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def routing(server: ServerProcess) -> Routing:
    routing = Routing()
    routing.urls["kokoro"] = ws_url(server)
    return routing


@pytest.fixture(scope="module")
def bridge(tls: LocalTls, routing: Routing) -> Iterator[BidiBridge]:
    with BidiBridge(tls, routing.open_session) as started:
        yield started


@pytest.fixture(scope="module")
def worker(bridge: BidiBridge) -> Iterator[BidiWorker]:
    env = {
        **os.environ,
        **bridge.client_env(),
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    with BidiWorker(env) as started:
        yield started


def events_until_closed(session: Any) -> list[dict[str, Any]]:
    messages = []
    while session.closed is None:
        messages.append(session.next_message(TURN_TIMEOUT_S))
    return messages


def direct_events(server: ServerProcess, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The same request straight to the container's WebSocket."""
    ws = websocket.create_connection(ws_url(server), timeout=TURN_TIMEOUT_S)
    try:
        ws.send(json.dumps(body))
        events = []
        while not (events and events[-1]["done"]):
            events.append(json.loads(ws.recv()))
        return events
    finally:
        ws.close()


def audio_of(events: list[dict[str, Any]]) -> bytes:
    return b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == "chunk")


def test_two_turns_on_one_session_match_the_container_and_are_timed_per_turn(
    worker: BidiWorker, routing: Routing, server: ServerProcess
) -> None:
    first, second = speech_request("turn-1", "Hello there."), speech_request("turn-2", "Goodbye.")
    began = routing.began["kokoro"]
    session = worker.open("kokoro", events=True)
    session.wait_opened(TURN_TIMEOUT_S)
    assert routing.in_flight["kokoro"] == 1  # the session holds its instance while open
    assert routing.serving["kokoro"] == 0  # but no request is served: nothing in flight
    results = []
    for body in (first, second):
        results.append(session.turn(body, TURN_TIMEOUT_S))
        assert routing.serving["kokoro"] == 0  # released before its `done` reached the client
    assert routing.began["kokoro"] == began + 2
    closed = session.close()
    assert closed["error"] is None
    assert routing.in_flight["kokoro"] == 0

    for result, body in zip(results, (first, second), strict=True):
        assert result.context_id == body["context_id"]
        assert result.outcome == "ok", result.detail
        assert result.ttfab_ms is not None
        assert 0 < result.ttfab_ms <= result.latency_ms
        assert result.server_first_chunk_ms is not None
        assert result.audio_bytes > 0
    # Every event came through, each its own PayloadPart, in order: the same audio as direct.
    bridged = [m["event"] for m in session_events(session)]
    turn_1 = [e for e in bridged if e["context_id"] == "turn-1"]
    assert [e["type"] for e in turn_1][-1] == "done"
    assert audio_of(turn_1) == audio_of(direct_events(server, first))
    assert len(audio_of(turn_1)) == results[0].audio_bytes


def session_events(session: Any) -> list[dict[str, Any]]:
    return [m for m in session.log if m["kind"] == "event"]


def test_a_cancel_stops_its_turn_and_the_session_carries_on(
    worker: BidiWorker, routing: Routing
) -> None:
    began = routing.began["kokoro"]
    session = worker.open("kokoro", events=True)
    session.send(speech_request("long", LONG_TEXT))
    while True:  # cancel once its first audio arrived
        message = session.next_message(TURN_TIMEOUT_S)
        assert message["kind"] in ("opened", "event"), message
        if message["kind"] == "event" and message["event"]["type"] == "chunk":
            break
    session.cancel("long")
    while (message := session.next_message(TURN_TIMEOUT_S))["kind"] != "turn":
        pass
    assert message["context_id"] == "long"
    assert message["outcome"] == "cancelled"
    assert (
        routing.serving["kokoro"] == 0
    )  # its `cancelled` event ended it; the cancel is no request
    assert message["latency_ms"] < 30_000  # it did not run to the end of a long text
    after = session.turn(speech_request("after", "Still here."), TURN_TIMEOUT_S)
    assert after.outcome == "ok"
    assert routing.serving["kokoro"] == 0 and routing.began["kokoro"] == began + 2
    assert session.close()["error"] is None
    # Nothing of the cancelled context arrived after its `cancelled` event.
    events = [m["event"] for m in session_events(session) if m["event"]["context_id"] == "long"]
    assert events[-1]["type"] == "cancelled"


def test_no_instance_is_an_error_the_sdk_surfaces(worker: BidiWorker, routing: Routing) -> None:
    session = worker.open("nowhere")
    with pytest.raises(BidiWorkerError, match="InputValidationError: endpoint nowhere has no"):
        session.wait_opened(TURN_TIMEOUT_S)
    assert routing.opened["nowhere"] == 0


def test_an_instance_gone_mid_session_is_a_stream_error_event(
    worker: BidiWorker, routing: Routing, tmp_path: Path
) -> None:
    with LocalServer(SERVER_ARGS) as doomed:
        doomed.wait_ready(READY_TIMEOUT_S)
        routing.urls["doomed"] = ws_url(doomed)
        session = worker.open("doomed", events=True)
        session.send(speech_request("cut", LONG_TEXT))
        while session.next_message(TURN_TIMEOUT_S)["kind"] != "event":
            pass
        assert doomed.process is not None
        doomed.process.kill()  # the instance dies with the stream running
        messages = events_until_closed(session)
    turn = next(m for m in messages if m["kind"] == "turn")
    assert turn["outcome"] == "error"
    assert "ModelStreamError:StreamBroken" in turn["detail"]
    assert session.closed is not None
    assert session.closed["error"] == "ModelStreamError:StreamBroken"
    assert routing.in_flight["doomed"] == 0
