"""Hostile clients at the bidi bridge's wire, with a raw HTTP/2 client (`h2_client`): headers
that are not UTF-8, bytes that are not HTTP/2, malformed events, more body than the instance
reads, many sessions that vanish at once. Behind the bridge a scripted WebSocket instance
(`echo` answers each message; `deaf` never reads) and a routing stand-in that counts sessions
in flight, as the cloud's `open_session` does. No model runs: the module takes a few seconds
(the fuzz: FUZZ_EXAMPLES examples, default 20).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from aiohttp import WSMsgType, web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.local_cloud.h2_client import RawH2Client, StreamSeen, signed, text_event
from tts_bench.local_cloud.data_plane.bidi_bridge import BidiBridge
from tts_bench.local_cloud.data_plane.bidi_session import SessionLease
from tts_bench.local_cloud.data_plane.event_stream import Message
from tts_bench.local_cloud.data_plane.tls import LocalTls, make_local_tls
from tts_bench.local_cloud.errors import NoInstanceError

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "20"))


class ScriptedInstance:
    """WebSocket routes on loopback: /echo answers each text message, /deaf never reads. Its
    socket's receive buffer is small, so what a deaf instance leaves unread stays small."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/echo", self._echo)
        app.router.add_get("/deaf", self._deaf)
        self.runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5
        )
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.base = ""

    async def _echo(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await ws.send_str(f"echo:{message.data}")
        return ws

    async def _deaf(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await asyncio.sleep(3600)
        return ws

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.runner.setup(), self.loop).result(10)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.bind(("127.0.0.1", 0))
        site = web.SockSite(self.runner, sock)
        asyncio.run_coroutine_threadsafe(site.start(), self.loop).result(10)
        host, port = self.runner.addresses[0][:2]
        self.base = f"ws://{host}:{port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class Routing:
    def __init__(self, instance: ScriptedInstance) -> None:
        self.instance = instance
        self.in_flight: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def open_session(self, endpoint: str) -> Iterator[SessionLease]:
        if endpoint not in ("echo", "deaf"):
            raise NoInstanceError(f"endpoint {endpoint} has no InService instance")
        with self._lock:
            self.in_flight[endpoint] += 1
        try:
            yield SessionLease(f"{self.instance.base}/{endpoint}")
        finally:
            with self._lock:
                self.in_flight[endpoint] -= 1

    def total(self) -> int:
        with self._lock:
            return sum(self.in_flight.values())


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> LocalTls:
    return make_local_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def routing() -> Iterator[Routing]:
    instance = ScriptedInstance()
    instance.start()
    yield Routing(instance)
    instance.stop()


@pytest.fixture(scope="module")
def bridge(tls: LocalTls, routing: Routing) -> Iterator[BidiBridge]:
    with BidiBridge(tls, routing.open_session) as started:
        yield started


@pytest.fixture
def client(bridge: BidiBridge, tls: LocalTls) -> Iterator[RawH2Client]:
    opened = RawH2Client(bridge.port, str(tls.ca_path))
    yield opened
    opened.close()


@pytest.fixture(autouse=True)
def no_error_logged(caplog: pytest.LogCaptureFixture, routing: Routing) -> Iterator[None]:
    with caplog.at_level(logging.WARNING):
        yield
    deadline = time.monotonic() + 5
    while routing.total() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert routing.total() == 0, routing.in_flight
    records = caplog.get_records("call") + caplog.get_records("teardown")
    errors = [r for r in records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]


def echo_round_trip(bridge: BidiBridge, tls: LocalTls) -> None:
    """A well-behaved session: one message echoed, then the client's end ends it cleanly."""
    client = RawH2Client(bridge.port, str(tls.ca_path))
    try:
        stream = client.open("echo")
        client.until(lambda: client.streams[stream].status == 200)
        client.send(stream, text_event("hi"))
        client.until(lambda: b"echo:hi" in client.streams[stream].body)
        client.send(stream, signed(None), end=True)
        client.until(lambda: client.streams[stream].ended)
    finally:
        client.close()


def test_headers_that_are_not_utf8_close_that_connection_with_a_goaway(
    client: RawH2Client, bridge: BidiBridge, tls: LocalTls
) -> None:
    client.open("echo", extra=[(b"x-bad", b"\xff\xfe")])
    client.until(lambda: client.goaway is not None)
    assert client.goaway.error_code == 1  # PROTOCOL_ERROR
    echo_round_trip(bridge, tls)


def test_a_client_that_sends_faster_than_its_instance_reads_is_held_by_its_window(
    client: RawH2Client, bridge: BidiBridge, tls: LocalTls
) -> None:
    """The `deaf` instance reads nothing: the client can send its stream window, the event being
    decoded (1 MB) and what the sockets on the way buffer, and no more (before, the bridge
    acknowledged every byte at once and queued it in memory)."""
    stream = client.open("deaf")
    client.until(lambda: client.streams[stream].status == 200)
    big = signed(event("PayloadPart", b"x" * 1_000_000, "BINARY"))
    sent = 0
    stalled_since = time.monotonic()
    while time.monotonic() - stalled_since < 1.0 and sent < 32_000_000:
        moved = client.send(stream, big[sent % len(big) :])
        sent += moved
        if moved:
            stalled_since = time.monotonic()
        else:
            client.pump(0.005)  # window updates, if the bridge took anything
    assert sent < 8_000_000, f"the client sent {sent} bytes that nobody read"
    client.reset(stream)
    echo_round_trip(bridge, tls)  # the other sessions of the bridge still flow


def test_many_sessions_that_vanish_at_once_are_all_released(
    client: RawH2Client, routing: Routing
) -> None:
    streams = [client.open("echo") for _ in range(150)]
    client.until(lambda: all(client.streams[s].status == 200 for s in streams), timeout_s=30)
    assert routing.in_flight["echo"] == 150
    client.close()  # the TCP connection goes, with 150 sessions open on it
    deadline = time.monotonic() + 5
    while routing.total() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert routing.total() == 0


def test_a_reset_stream_is_released_at_once(client: RawH2Client, routing: Routing) -> None:
    stream = client.open("deaf")
    client.until(lambda: client.streams[stream].status == 200)
    assert routing.in_flight["deaf"] == 1
    client.reset(stream)
    deadline = time.monotonic() + 1
    while routing.total() and time.monotonic() < deadline:
        client.pump(0.01)
    assert routing.total() == 0


def event(kind: str, payload: bytes = b"", data_type: str | None = None) -> Message:
    headers = {":message-type": "event", ":event-type": kind}
    return Message(headers | ({"DataType": data_type} if data_type else {}), payload)


MALFORMED_EVENTS = {
    "bad-crc": b"\x00\x00\x00\x10" + b"\x00" * 12,  # a prelude whose CRC is wrong
    "unsigned": Message({":date": 1}, b"x").encode(),
    "not-a-payload-part": signed(event("Other")),
    "utf8-that-is-not": signed(event("PayloadPart", b"\xff\xfe", "UTF8")),
}


@pytest.mark.parametrize("body", MALFORMED_EVENTS.values(), ids=MALFORMED_EVENTS.keys())
def test_a_malformed_event_ends_the_session_with_a_model_stream_error(
    client: RawH2Client, body: bytes
) -> None:
    stream = client.open("echo")
    client.until(lambda: client.streams[stream].status == 200)
    client.send(stream, body)
    client.until(lambda: client.streams[stream].ended or client.streams[stream].reset)
    (last,) = client.streams[stream].messages()[-1:]
    assert last.headers[":exception-type"] == "ModelStreamError"
    assert b"InvalidEvent" in last.payload


def test_an_unknown_endpoint_or_path_is_a_4xx_before_any_stream(client: RawH2Client) -> None:
    unknown = client.open("nowhere")
    wrong = client.h2.get_next_available_stream_id()
    client.streams[wrong] = StreamSeen()
    headers = [
        (b":method", b"GET"),
        (b":path", b"/x"),
        (b":scheme", b"https"),
        (b":authority", b"a"),
    ]
    client.h2.send_headers(wrong, headers, end_stream=True)
    client.flush()
    client.until(lambda: client.streams[unknown].ended and client.streams[wrong].ended)
    assert client.streams[unknown].status == 400
    assert client.streams[wrong].status == 404


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)


@FUZZ
@given(
    data=st.binary(max_size=2000),
    preface=st.booleans(),
    session_first=st.booleans(),
)
def test_fuzz_any_bytes_on_the_connection_never_break_the_bridge(
    bridge: BidiBridge, tls: LocalTls, data: bytes, preface: bool, session_first: bool
) -> None:
    """Whatever follows the preface (or comes instead of it, or after a session opened): no
    error logged, every session released (the autouse check), and the next client served."""
    client = RawH2Client(bridge.port, str(tls.ca_path), preface=preface or session_first)
    try:
        if session_first:
            stream = client.open("echo")
            client.until(lambda: client.streams[stream].status == 200)
        client.send_raw(data)
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline and client.pump(0.02):
            pass
    finally:
        client.close()
    echo_round_trip(bridge, tls)
