"""SageMaker bidirectional streaming on loopback: HTTP/2 over TLS, bridged to a container's WebSocket.

The AWS SDK's HTTP/2 client (`aws-sdk-sagemaker-runtime-http2`, CRT transport) opens
`POST /endpoints/{name}/invocations-bidirectional-stream` and keeps it open both ways: its body
is a stream of signed envelopes, each holding one `PayloadPart` event (a request or a cancel for
the container, DataType UTF8 or BINARY), and the response body is a stream of `PayloadPart`
events (one per WebSocket message from the container) or a modeled exception event.

Per HTTP/2 stream the bridge asks `open_session(endpoint_name)` for an InService instance (a
`SessionLease`: its WebSocket URL, and hooks that count a request on it in flight), connects to
it, sends the 200 headers, and then pumps both ways. Each request message counts from the
moment it is forwarded until the container's last event for its context (`done: true`), or
until the session ends: an idle session counts nothing. The session lasts until either side
ends it:

- the client's empty signed envelope (or END_STREAM) ends its input: the WebSocket is closed
  and the response ends cleanly, as SageMaker ends a session the client closes;
- the container closing normally (1000) ends the response cleanly; any other end (the
  instance killed, a drain that cut the socket) sends a `ModelStreamError` event with
  ErrorCode `StreamBroken`, which the SDK raises from `receive()`;
- no instance, or no such endpoint (a `TtsBenchError` from `open_session`), answers 400
  `InputValidationError` with its message before any stream starts, as the local cloud's
  runtime answers boto3 (`ValidationError`); an instance that refuses the WebSocket answers
  424 `ModelError` (`OriginalStatusCode`), one that cannot be reached 503
  `ServiceUnavailableError`.

Signatures are required to be present on every envelope but are not verified (the local cloud
accepts any credentials, as moto does). The request body is acknowledged to HTTP/2 flow control
only once the session has taken it, so a client that sends faster than its instance reads is
held by its window instead of filling the bridge's memory. A connection that breaks the
protocol (bad frames, headers that are not UTF-8) is closed with a GOAWAY saying why. The server is `h2` (sans-I/O) on asyncio: the ASGI
servers here either lack HTTP/2 or buffer a request body before the response may start, and
this stream must flow both ways at once. It runs on its own thread and loop, so the cloud's
runtime (or a test) can start and stop it from synchronous code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from tts_bench.errors import TtsBenchError
from tts_bench.local_cloud.data_plane.bidi_frames import unwrap_signed
from tts_bench.local_cloud.data_plane.bidi_session import OpenSession, SessionLease, SessionRequests
from tts_bench.local_cloud.data_plane.event_stream import (
    FrameError,
    Message,
    MessageDecoder,
    payload_part,
    stream_exception,
)
from tts_bench.local_cloud.data_plane.tls import LocalTls

PATH_PATTERN = re.compile(r"^/endpoints/([^/?]+)/invocations-bidirectional-stream(?:\?.*)?$")
EVENT_STREAM_TYPE = "application/vnd.amazon.eventstream"
WS_CONNECT_TIMEOUT_S = 10.0
# A WebSocket close the instance does not answer (it stopped reading) is cut after this.
WS_CLOSE_TIMEOUT_S = 1.0
READ_BYTES = 65536
# One SDK client multiplexes every session of a Locust process over one connection: allow more
# streams than the largest rung (h2's default is 100).
MAX_CONCURRENT_STREAMS = 4096
# Request bytes one connection may have sent and the bridge not yet forwarded (over all its
# streams; each stream also stays within h2's default 64 KiB window). A stalled session holds at
# most its window, so the others keep flowing.
CONNECTION_WINDOW_BYTES = 16 * 1024 * 1024
START_TIMEOUT_S = 10.0


class BidiBridgeError(TtsBenchError):
    """The bridge could not start."""


@dataclass
class _Stream:
    """One HTTP/2 request stream: its inbound body and its send window."""

    stream_id: int
    # (data, its flow-controlled length): acknowledged to the client once taken off the queue.
    inbound: asyncio.Queue[tuple[bytes, int] | None] = field(default_factory=asyncio.Queue)
    window_open: asyncio.Event = field(default_factory=asyncio.Event)
    reset: bool = False
    task: asyncio.Task[None] | None = None
    # The session holds its instance: a client that leaves now has its task cancelled, which
    # releases the instance at once even when the instance is not reading or writing.
    session_live: bool = False

    def end(self) -> None:
        """The client reset the stream or its connection went: wake and stop the session."""
        self.reset = True
        self.inbound.put_nowait(None)
        self.window_open.set()
        if self.session_live and self.task is not None:
            self.task.cancel()


class _Connection:
    """One TLS connection speaking HTTP/2: the h2 state machine, its socket, its streams."""

    def __init__(
        self, bridge: BidiBridge, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.bridge, self.reader, self.writer = bridge, reader, writer
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=config)
        self.h2.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS
            },
        )
        self.streams: dict[int, _Stream] = {}
        self._drain_lock = asyncio.Lock()

    async def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)
            async with self._drain_lock:
                with contextlib.suppress(ConnectionError):
                    await self.writer.drain()

    async def run(self) -> None:
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(CONNECTION_WINDOW_BYTES - 65535)
        await self.flush()
        try:
            while data := await self.reader.read(READ_BYTES):
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError:
                    await self.flush()  # h2 queued a GOAWAY saying why
                    break
                except UnicodeDecodeError:  # a header h2 could not decode as UTF-8
                    self.h2.close_connection(
                        h2.errors.ErrorCodes.PROTOCOL_ERROR, b"headers must be UTF-8"
                    )
                    await self.flush()
                    break
                for event in events:
                    self._on_event(event)
                await self.flush()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for stream in self.streams.values():
                stream.end()
            tasks = [s.task for s in self.streams.values() if s.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)
            self.writer.close()

    def _on_event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            stream = _Stream(event.stream_id)
            self.streams[event.stream_id] = stream
            headers = dict(event.headers or [])
            stream.task = asyncio.create_task(self._serve(stream, headers))
        elif isinstance(event, h2.events.DataReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None and event.data:
                stream.inbound.put_nowait((event.data, event.flow_controlled_length))
            else:  # padding only, or a stream already gone: nothing will take it
                self.acknowledge(event.stream_id, event.flow_controlled_length)
        elif isinstance(event, h2.events.StreamEnded):
            if (stream := self.streams.get(event.stream_id)) is not None:
                stream.inbound.put_nowait(None)
        elif isinstance(event, h2.events.StreamReset):
            if (stream := self.streams.get(event.stream_id)) is not None:
                stream.end()
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            stream_id = getattr(event, "stream_id", 0)
            for stream in self.streams.values():
                if stream_id in (0, stream.stream_id):
                    stream.window_open.set()

    async def _serve(self, stream: _Stream, headers: dict[str, str]) -> None:
        session = _Session(self, stream, headers)
        try:
            await session.run()
        except Exception as exc:  # a fault here must reach the client, not leave it waiting
            message = f"the local cloud's bridge failed: {type(exc).__name__}: {exc}"
            if session.responded:
                await self.send(stream, stream_exception("InternalStreamFailure", message).encode())
                await self.send(stream, b"", end=True)
            else:
                await self.fail_before_stream(stream, 500, "InternalServerError", message)
        finally:
            self.streams.pop(stream.stream_id, None)
            self._give_back_window(stream)

    def _give_back_window(self, stream: _Stream) -> None:
        """What an ended session left untaken still counts against the connection's window."""
        while not stream.inbound.empty():
            item = stream.inbound.get_nowait()
            if item is not None:
                self.acknowledge(stream.stream_id, item[1])

    def acknowledge(self, stream_id: int, length: int) -> None:
        """Give `length` bytes of window back to the client (sent with the next flush)."""
        if length:
            with contextlib.suppress(h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                self.h2.acknowledge_received_data(length, stream_id)

    async def take(self, stream: _Stream) -> bytes | None:
        """The stream's next request bytes (None: its input is over), acknowledged as taken."""
        item = await stream.inbound.get()
        if item is None:
            return None
        data, length = item
        self.acknowledge(stream.stream_id, length)
        await self.flush()
        return data

    # ------------------------------------------------------------------ sending

    async def respond(self, stream: _Stream, status: int, headers: dict[str, str]) -> None:
        if stream.reset:
            return
        pairs = [(":status", str(status)), *headers.items()]
        with contextlib.suppress(h2.exceptions.StreamClosedError):
            self.h2.send_headers(stream.stream_id, pairs)
        await self.flush()

    async def send(self, stream: _Stream, data: bytes, end: bool = False) -> None:
        """Send `data` on `stream` within its flow-control window; END_STREAM after it if `end`."""
        try:
            while data and not stream.reset:
                window = min(
                    self.h2.local_flow_control_window(stream.stream_id),
                    self.h2.max_outbound_frame_size,
                )
                if window <= 0:
                    stream.window_open.clear()
                    await stream.window_open.wait()
                    continue
                self.h2.send_data(stream.stream_id, data[:window])
                data = data[window:]
                await self.flush()
            if end and not stream.reset:
                self.h2.end_stream(stream.stream_id)
                await self.flush()
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            stream.reset = True

    async def fail_before_stream(
        self, stream: _Stream, status: int, error_type: str, message: str, **fields: Any
    ) -> None:
        """An HTTP error before the stream starts, in the shape the SDK's restJson1 parses."""
        body = json.dumps({"Message": message, **fields}).encode()
        await self.respond(
            stream,
            status,
            {
                "content-type": "application/json",
                "x-amzn-errortype": error_type,
                "x-amzn-requestid": str(uuid.uuid4()),
                "content-length": str(len(body)),
            },
        )
        await self.send(stream, body, end=True)


class _Session:
    """One bidirectional session: an HTTP/2 stream bridged to one WebSocket."""

    def __init__(self, conn: _Connection, stream: _Stream, headers: dict[str, str]) -> None:
        self.conn, self.stream, self.headers = conn, stream, headers
        self.client_closed = False
        self.responded = False  # the 200 and its event stream have started
        self.requests = SessionRequests(SessionLease(""))  # the lease's, once the session has one

    async def run(self) -> None:
        conn, stream = self.conn, self.stream
        path = self.headers.get(":path", "")
        match = PATH_PATTERN.match(path)
        if self.headers.get(":method") != "POST" or match is None:
            await conn.fail_before_stream(
                stream, 404, "UnknownOperationException", f"no such operation: {path}"
            )
            return
        endpoint_name = match.group(1)
        session = conn.bridge.open_session(endpoint_name)
        try:
            lease = await asyncio.to_thread(session.__enter__)
        except TtsBenchError as exc:  # NoInstanceError, or an endpoint the cloud does not serve
            await conn.fail_before_stream(stream, 400, "InputValidationError", str(exc))
            return
        ending: Message | None = None
        stream.session_live = True
        self.requests = SessionRequests(lease)
        try:
            if not stream.reset:  # the client may have left while its instance was chosen
                ending = await self._bridge(lease.url)
        finally:
            stream.session_live = False
            # Released before the last byte leaves, so a client that saw the end sees the
            # session no longer counted.
            self.requests.end()
            await asyncio.to_thread(session.__exit__, None, None, None)
        if self.responded:
            if ending is not None:
                await self._send_event(ending)
            await conn.send(stream, b"", end=True)

    async def _bridge(self, ws_url: str) -> Message | None:
        """Connect and pump both ways; returns the error event that ends the stream, if any."""
        conn, stream = self.conn, self.stream
        try:
            async with asyncio.timeout(WS_CONNECT_TIMEOUT_S):
                ws = await conn.bridge.http.ws_connect(
                    ws_url, autoping=True, timeout=aiohttp.ClientWSTimeout(ws_close=5.0)
                )
        except aiohttp.WSServerHandshakeError as exc:
            await conn.fail_before_stream(
                stream,
                424,
                "ModelError",
                f"the instance refused the WebSocket: HTTP {exc.status}",
                OriginalStatusCode=exc.status,
                OriginalMessage=exc.message,
            )
            return None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            await conn.fail_before_stream(
                stream,
                503,
                "ServiceUnavailableError",
                f"the instance at {ws_url} could not be reached: {exc}",
            )
            return None
        await conn.respond(
            stream,
            200,
            {"content-type": EVENT_STREAM_TYPE, "x-amzn-requestid": str(uuid.uuid4())},
        )
        self.responded = True
        upstream = asyncio.create_task(self._client_to_ws(ws))
        try:
            return await self._ws_to_client(ws)
        finally:
            upstream.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await upstream
            await _close(ws)

    async def _client_to_ws(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Unwrap each signed envelope and send its PayloadPart to the container."""
        decoder = MessageDecoder()
        try:
            while (data := await self.conn.take(self.stream)) is not None:
                for envelope in decoder.feed(data):
                    event = unwrap_signed(envelope)
                    if event is None:
                        break  # the empty envelope: the client's input is over
                    await self._forward(ws, event)
                else:
                    continue
                break
        except FrameError as exc:
            await self._send_event(
                stream_exception("ModelStreamError", f"bad request event: {exc}", "InvalidEvent")
            )
        self.client_closed = True
        await _close(ws)  # ends `_ws_to_client`'s loop

    async def _forward(self, ws: aiohttp.ClientWebSocketResponse, event: Message) -> None:
        kind = event.headers.get(":event-type")
        if event.headers.get(":message-type") != "event" or kind != "PayloadPart":
            raise FrameError(f"expected a PayloadPart event, got {kind!r}")
        if event.headers.get("DataType") == "UTF8":
            try:
                text = event.payload.decode()
            except UnicodeDecodeError as exc:
                raise FrameError(f"DataType UTF8 but the bytes are not: {exc}") from None
            self.requests.sent(text)  # counted before the container can start on it
            await ws.send_str(text)
        else:  # SageMaker's default DataType is BINARY
            await ws.send_bytes(event.payload)

    async def _ws_to_client(self, ws: aiohttp.ClientWebSocketResponse) -> Message | None:
        """Each container message becomes one PayloadPart; an abnormal end, an error event."""
        async for message in ws:
            if message.type is aiohttp.WSMsgType.TEXT:
                self.requests.received(message.data)  # released before the client sees the end
                await self._send_event(payload_part(message.data.encode(), "UTF8"))
            elif message.type is aiohttp.WSMsgType.BINARY:
                await self._send_event(payload_part(message.data, "BINARY"))
            if self.stream.reset:
                return None
        code = ws.close_code
        if self.client_closed or code == aiohttp.WSCloseCode.OK:
            return None
        reason = f"the instance's WebSocket ended (close code {code})"
        if (exc := ws.exception()) is not None:
            reason += f": {exc}"
        return stream_exception("ModelStreamError", reason, "StreamBroken")

    async def _send_event(self, message: Message) -> None:
        await self.conn.send(self.stream, message.encode())


async def _close(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Close the instance's WebSocket; one that does not answer (or read) is cut."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WS_CLOSE_TIMEOUT_S):
            await ws.close()


class BidiBridge:
    """HTTP/2 over TLS on loopback: POST /endpoints/{name}/invocations-bidirectional-stream,
    signed event envelopes unwrapped, bridged to an instance's WebSocket.

    `open_session(endpoint_name)` yields a `SessionLease` on the chosen InService instance for
    the life of the session and raises a `TtsBenchError` (NoInstanceError) when none is
    InService.
    """

    def __init__(
        self,
        tls: LocalTls,
        open_session: OpenSession,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.tls, self.open_session = tls, open_session
        self.host, self.port = host, port
        self.http: aiohttp.ClientSession
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def client_env(self) -> dict[str, str]:
        """What a client exports to reach this bridge: the endpoint URL and the CA bundle."""
        return {
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": self.url,
            "SSL_CERT_FILE": str(self.tls.bundle_path),
        }

    def start(self) -> str:
        """Listen; returns https://HOST:PORT, the AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2 value."""
        if self._thread is not None:
            return self.url
        self._thread = threading.Thread(target=self._run, name="bidi-bridge", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S) or self._failure is not None:
            raise BidiBridgeError(f"the HTTP/2 bridge did not start: {self._failure}")
        return self.url

    def stop(self) -> None:
        """Close the listener and every session (their WebSockets close; the cloud un-counts them)."""
        if self._thread is None or self._loop is None or self._stopping is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already ended
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=30)
        self._thread = None

    def __enter__(self) -> BidiBridge:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to start(); the thread must not die silently
            self._failure = exc
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        # The session hooks (`open_session`'s enter and exit) run off the loop, on one thread:
        # they are brief, and asyncio's default pool kept a thread for every hook that ever
        # overlapped another (up to cores + 4), so the cloud's thread count grew by chance.
        self._loop.set_default_executor(
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="bidi-bridge-hooks")
        )
        self._stopping = asyncio.Event()
        # No pool limit: every open session holds one WebSocket (aiohttp's default of 100 made
        # the 101st session wait for a free connection, silently, for as long as the others ran).
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        connections: set[asyncio.Task[None]] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:  # always, inside asyncio's connection callback
                connections.add(task)
            try:
                await self._accept(reader, writer)
            finally:
                connections.discard(task)  # type: ignore[arg-type]

        try:
            server = await asyncio.start_server(
                accept, self.host, self.port, ssl=self.tls.server_context()
            )
        except OSError as exc:
            await self.http.close()
            raise BidiBridgeError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        async with server:
            await self._stopping.wait()
            server.close()
            for task in list(connections):
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)
        await self.http.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        protocol = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        if protocol != "h2":
            # The SDK only speaks HTTP/2 here; say so to anything else, in HTTP/1.1.
            body = b"this endpoint speaks HTTP/2 only (ALPN h2)\n"
            writer.write(
                b"HTTP/1.1 505 HTTP Version Not Supported\r\nconnection: close\r\n"
                b"content-type: text/plain\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
        await _Connection(self, reader, writer).run()
