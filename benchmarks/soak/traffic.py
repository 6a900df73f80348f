"""The soak's traffic: one open-loop mix of well- and ill-behaved clients per soaked thing.

Each kind is a function that plays one client to its end and returns an outcome word.
`Streams` sends the two kinds that a real client sends (a good request read to its end, and a
stream left after its first event): straight to a server with `http.client`, or through the
local cloud with boto3. The rest go over raw sockets, to a server's `/invocations` or the
runtime's response-stream path alike: a reset (RST after the first bytes), a stream never read,
a body announced and never sent, malformed JSON and a malformed request line. Idle
bidirectional sessions (`IdleSessions`) are opened and left without a request.

Outcomes in FAULTS are the server's fault: a 5xx that is not load shedding, a broken stream,
a connection cut under a client that sent its request whole and kept reading.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import websocket
from botocore.exceptions import ClientError, EventStreamError

FAULTS = ("5xx", "timeout", "stream_error", "connection_error", "incomplete")
SHORT_TEXT = "Thank you for calling."
# Long enough that a stream left after its first event is left mid-way, short enough to spare
# two shared cores.
LONG_TEXT = " ".join(f"This is sentence {i} of a longer answer." for i in range(1, 4))
MIX = {  # the share of each kind in a target's mixed rate
    "good": 0.40,
    "aborted": 0.15,
    "reset": 0.10,
    "never_read": 0.10,
    "bodyless": 0.10,
    "malformed": 0.15,
}
MAX_FAULT_DETAILS = 10
HOLD_S = 8.0  # how long a never-read stream or a body-less connection is held open
SOCKET_TIMEOUT_S = 90.0  # past the 60 s invocation ceiling


def speech_body(context_id: str, text: str = SHORT_TEXT) -> bytes:
    return json.dumps(
        {
            "context_id": context_id,
            "transcript": text,
            "language": "en",
            "voice": {"mode": "id", "id": "jf_alpha"},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        }
    ).encode()


def status_outcome(status: int, body: bytes) -> str:
    """An HTTP status as an outcome: shedding (503 `queue_saturated`, also inside a 424
    ModelError) is the client's load, not a fault."""
    if b"queue_saturated" in body:
        return "shed"
    if b"ModelInvocationTimeExceeded" in body:
        return "timeout"
    if status >= 500 or b"Received server error" in body:  # the latter: a container 5xx, wrapped
        return "5xx"
    if status == 424 and (original := re.search(rb"Received client error \((\d+)\)", body)):
        return f"424/{original[1].decode()}"  # SageMaker's wrap of the container's 4xx
    return str(status) if status >= 400 else "ok"


@dataclass(frozen=True)
class Wire:
    """Where raw requests go: host, port and the POST path (a server's `/invocations` or the
    runtime's `/endpoints/<name>/invocations-response-stream`)."""

    host: str
    port: int
    path: str

    def connect(self) -> socket.socket:
        return socket.create_connection((self.host, self.port), timeout=SOCKET_TIMEOUT_S)

    def head(self, length: int) -> bytes:
        return (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        ).encode()


def _status_line(sock: socket.socket) -> tuple[int | None, bytes]:
    """The response's status and what came with it; None when the server closed first."""
    got = b""
    while b"\r\n\r\n" not in got and len(got) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    if not got.startswith(b"HTTP/1."):
        return None, got
    return int(got.split(b" ", 2)[1]), got


def reset(wire: Wire, context_id: str) -> str:
    body = speech_body(context_id, LONG_TEXT)
    with wire.connect() as sock:
        sock.sendall(wire.head(len(body)) + body)
        status, got = _status_line(sock)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return "sent" if status is None else status_outcome(status, got)


def never_read(wire: Wire, context_id: str) -> str:
    body = speech_body(context_id)
    with wire.connect() as sock:
        sock.sendall(wire.head(len(body)) + body)
        time.sleep(HOLD_S)
    return "sent"


def bodyless(wire: Wire, context_id: str) -> str:
    with wire.connect() as sock:
        sock.sendall(wire.head(512))
        time.sleep(HOLD_S)
    return "sent"


def malformed(wire: Wire, context_id: str) -> str:
    """Half bad JSON fields (422; 424 through SageMaker), half a bad request line (400)."""
    with wire.connect() as sock:
        if random.random() < 0.5:
            body = json.dumps({"context_id": context_id, "transcript": 5, "language": []}).encode()
            sock.sendall(wire.head(len(body)) + body)
        else:
            sock.sendall(b"BREW /pot HTTP/9.9\r\n\x00\x01\r\n\r\n")
        status, got = _status_line(sock)
    return "closed" if status is None else status_outcome(status, got)


class Streams(Protocol):
    def good(self, context_id: str) -> str: ...

    def aborted(self, context_id: str) -> str: ...


class DirectStreams:
    """A server's `/invocations`, read with `http.client` as any HTTP client would."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def _post(self, body: bytes) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        connection = http.client.HTTPConnection(
            self.wire.host, self.wire.port, timeout=SOCKET_TIMEOUT_S
        )
        connection.request("POST", "/invocations", body, {"Content-Type": "application/json"})
        return connection, connection.getresponse()

    def good(self, context_id: str) -> str:
        try:
            connection, answer = self._post(speech_body(context_id))
            try:
                data = answer.read()
            finally:
                connection.close()
        except (OSError, http.client.HTTPException):
            return "connection_error"
        if answer.status != 200:
            return status_outcome(answer.status, data)
        lines = data.strip().splitlines()
        if not lines:
            return "incomplete"
        last = json.loads(lines[-1]).get("type")
        return "ok" if last == "done" else ("stream_error" if last == "error" else "incomplete")

    def aborted(self, context_id: str) -> str:
        try:
            connection, answer = self._post(speech_body(context_id, LONG_TEXT))
            try:
                if answer.status != 200:
                    return status_outcome(answer.status, answer.read())
                answer.readline()
            finally:
                connection.close()
        except (OSError, http.client.HTTPException):
            return "connection_error"
        return "ok"


class CloudStreams:
    """The local cloud's InvokeEndpointWithResponseStream, through boto3."""

    def __init__(self, client: Any, endpoint: str) -> None:
        self.client, self.endpoint = client, endpoint
        self.faults_seen: list[str] = []

    def _stream(self, body: bytes) -> Any:
        return self.client.invoke_endpoint_with_response_stream(
            EndpointName=self.endpoint, Body=body, ContentType="application/json"
        )["Body"]

    def _classified(self, run: Callable[[], str]) -> str:
        try:
            return run()
        except EventStreamError as exc:
            return self._fault("stream_error", exc)
        except ClientError as exc:
            meta = exc.response.get("ResponseMetadata", {})
            outcome = status_outcome(int(meta.get("HTTPStatusCode", 500)), str(exc).encode())
            return self._fault(outcome, exc) if outcome in FAULTS else outcome
        except Exception as exc:  # urllib3's ProtocolError and kin: a cut connection
            return self._fault("connection_error", exc)

    def _fault(self, outcome: str, exc: Exception) -> str:
        """Keep the first few faults' messages, so a report can say what they were."""
        if len(self.faults_seen) < MAX_FAULT_DETAILS:
            self.faults_seen.append(f"{outcome}: {type(exc).__name__}: {exc}"[:400])
        return outcome

    def good(self, context_id: str) -> str:
        def run() -> str:
            data = b"".join(
                e["PayloadPart"]["Bytes"]
                for e in self._stream(speech_body(context_id))
                if "PayloadPart" in e
            )
            lines = data.strip().splitlines()
            return "ok" if lines and json.loads(lines[-1]).get("type") == "done" else "incomplete"

        return self._classified(run)

    def aborted(self, context_id: str) -> str:
        def run() -> str:
            body = self._stream(speech_body(context_id, LONG_TEXT))
            next(iter(body))
            body.close()
            return "ok"

        return self._classified(run)


class IdleSessions(Protocol):
    """Bidirectional sessions opened and left idle; `close_all` ends them."""

    def open_one(self) -> str: ...

    def close_oldest(self) -> None: ...

    def close_all(self) -> None: ...

    def count(self) -> int: ...


class Outcomes:
    """Counts of (kind, outcome) for one target, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[tuple[str, str]] = Counter()

    def add(self, kind: str, outcome: str) -> None:
        with self._lock:
            self.counts[(kind, outcome)] += 1

    def faults(self) -> int:
        with self._lock:
            return sum(n for (_, outcome), n in self.counts.items() if outcome in FAULTS)

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            table: dict[str, dict[str, int]] = {}
            for (kind, outcome), n in sorted(self.counts.items()):
                table.setdefault(kind, {})[outcome] = n
            return table


class OpenLoop:
    """Poisson arrivals at `rate_rps(now)` while `on` is set, each kind drawn by MIX (or
    `kinds`' own weights) and run on a pool; an idle session every `bidi_every_s`, each closed
    after `bidi_hold_s`."""

    def __init__(
        self,
        name: str,
        kinds: Mapping[str, tuple[float, Callable[[str], str]]],
        rate_rps: Callable[[float], float],
        on: threading.Event,
        seed: int,
        sessions: IdleSessions | None = None,
        bidi_every_s: float = 0.0,
        bidi_hold_s: float = 0.0,
    ) -> None:
        self.name, self._kinds, self._rate = name, dict(kinds), rate_rps
        self._on, self._rng = on, random.Random(seed)
        self._sessions, self._bidi_every_s, self._bidi_hold_s = sessions, bidi_every_s, bidi_hold_s
        self._opened_at: list[float] = []
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(48, thread_name_prefix=f"soak-{name}")
        self._thread = threading.Thread(target=self._run, name=f"soak-{name}", daemon=True)
        self.outcomes = Outcomes()
        self._sent = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._sessions is not None:
            self._sessions.close_all()

    def _one(self, kind: str, run: Callable[[str], str], context_id: str) -> None:
        try:
            outcome = run(context_id)
        except OSError:
            outcome = "connection_error" if kind == "good" else "closed"
        except Exception as exc:  # a client bug, not the server's: counted, never raised
            outcome = f"client:{type(exc).__name__}"
        self.outcomes.add(kind, outcome)

    def _bidi(self, now: float) -> None:
        sessions = self._sessions
        if sessions is None:
            return
        while self._opened_at and now - self._opened_at[0] >= self._bidi_hold_s:
            self._opened_at.pop(0)
            self._pool.submit(sessions.close_oldest)
        if not self._on.is_set():
            if self._opened_at:
                self._opened_at.clear()
                self._pool.submit(sessions.close_all)
            return
        last = self._opened_at[-1] if self._opened_at else 0.0
        if now - last >= self._bidi_every_s:
            self._opened_at.append(now)
            self._pool.submit(self._one, "bidi_idle", self._open_session, "bidi")

    def _open_session(self, _context_id: str) -> str:
        assert self._sessions is not None  # only scheduled with sessions
        outcome = self._sessions.open_one()
        if not self._on.is_set():  # the load stopped while it opened: idle windows hold none
            self._sessions.close_all()
        return outcome

    def _run(self) -> None:
        names = list(self._kinds)
        weights = [self._kinds[n][0] for n in names]
        due = time.monotonic()
        while not self._stop.is_set():
            self._bidi(time.monotonic())
            rate = self._rate(time.monotonic())
            if not self._on.is_set() or rate <= 0:
                self._stop.wait(0.5)
                due = time.monotonic()
                continue
            gap = self._rng.expovariate(rate)
            if gap > 1.0:  # memoryless: wait a second, then draw again at the rate then
                self._stop.wait(1.0)
                due = time.monotonic()
                continue
            due += gap
            self._stop.wait(max(0.0, due - time.monotonic()))
            if self._stop.is_set() or not self._on.is_set():
                continue
            kind = self._rng.choices(names, weights)[0]
            self._sent += 1
            self._pool.submit(self._one, kind, self._kinds[kind][1], f"{self.name}-{self._sent}")


def mixed_kinds(wire: Wire, streams: Streams) -> dict[str, tuple[float, Callable[[str], str]]]:
    """Every kind of client, at MIX's shares, against one target."""
    runs: dict[str, Callable[[str], str]] = {
        "good": streams.good,
        "aborted": streams.aborted,
        "reset": lambda c: reset(wire, c),
        "never_read": lambda c: never_read(wire, c),
        "bodyless": lambda c: bodyless(wire, c),
        "malformed": lambda c: malformed(wire, c),
    }
    return {kind: (MIX[kind], runs[kind]) for kind in MIX}


class WebSocketSessions:
    """Idle sessions straight to a server's `/invocations-bidirectional-stream`."""

    def __init__(self, url: str) -> None:
        self._url = url.replace("http://", "ws://") + "/invocations-bidirectional-stream"
        self._lock = threading.Lock()
        self._open: list[websocket.WebSocket] = []

    def open_one(self) -> str:
        ws = websocket.create_connection(self._url, timeout=30)
        with self._lock:
            self._open.append(ws)
        return "opened"

    def close_oldest(self) -> None:
        with self._lock:
            ws = self._open.pop(0) if self._open else None
        if ws is not None:
            ws.close()

    def close_all(self) -> None:
        with self._lock:
            gone, self._open = self._open, []
        for ws in gone:
            ws.close()

    def count(self) -> int:
        with self._lock:
            return len(self._open)


class SdkSessions:
    """Idle sessions through the local cloud's HTTP/2 bridge, with the AWS SDK's client (a
    `BidiWorker` in `.venv-http2`)."""

    def __init__(self, worker: Any, endpoint: str) -> None:
        self._worker, self._endpoint = worker, endpoint
        self._lock = threading.Lock()
        self._open: list[Any] = []

    def open_one(self) -> str:
        session = self._worker.open(self._endpoint)
        session.wait_opened(60)
        with self._lock:
            self._open.append(session)
        return "opened"

    def close_oldest(self) -> None:
        with self._lock:
            session = self._open.pop(0) if self._open else None
        if session is not None:
            session.close()

    def close_all(self) -> None:
        with self._lock:
            gone, self._open = self._open, []
        for session in gone:
            session.close()

    def count(self) -> int:
        with self._lock:
            return len(self._open)
