"""A raw HTTP/2 client over TLS for hostile tests of the bidi bridge: it sends what the AWS SDK
never would (bad frames, headers that are not UTF-8, more body than anyone reads) and reports
what came back, frame by frame. `h2` in client mode on a blocking socket."""

from __future__ import annotations

import datetime
import socket
import ssl
import time
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from tts_bench.local_cloud.data_plane.bidi_frames import DATE_HEADER, SIGNATURE_HEADER
from tts_bench.local_cloud.data_plane.event_stream import Message, MessageDecoder, payload_part


def signed(inner: Message | None) -> bytes:
    """A signed envelope as the SDK sends it (the signature is not checked); None: the end."""
    headers = {DATE_HEADER: datetime.datetime.now(datetime.UTC), SIGNATURE_HEADER: b"\x00" * 32}
    return Message(headers, inner.encode() if inner is not None else b"").encode()


def text_event(text: str) -> bytes:
    return signed(payload_part(text.encode(), "UTF8"))


@dataclass
class StreamSeen:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    ended: bool = False
    reset: bool = False

    def messages(self) -> list[Message]:
        return list(MessageDecoder().feed(bytes(self.body)))


class RawH2Client:
    """One TLS connection speaking HTTP/2 (or not, when a test sends raw bytes)."""

    def __init__(
        self, port: int, ca_path: str, timeout_s: float = 10.0, preface: bool = True
    ) -> None:
        context = ssl.create_default_context(cafile=ca_path)
        context.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        config = h2.config.H2Configuration(
            client_side=True, header_encoding=None, validate_outbound_headers=False
        )
        self.h2 = h2.connection.H2Connection(config)
        self.streams: dict[int, StreamSeen] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.closed = False
        if preface:
            self.h2.initiate_connection()
            self.flush()

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def open(self, endpoint: str = "echo", extra: list[tuple[bytes, bytes]] | None = None) -> int:
        stream_id = self.h2.get_next_available_stream_id()
        path = f"/endpoints/{endpoint}/invocations-bidirectional-stream".encode()
        headers = [
            (b":method", b"POST"),
            (b":path", path),
            (b":scheme", b"https"),
            (b":authority", b"127.0.0.1"),
            (b"content-type", b"application/vnd.amazon.eventstream"),
            *(extra or []),
        ]
        self.h2.send_headers(stream_id, headers)
        self.streams[stream_id] = StreamSeen()
        self.flush()
        return stream_id

    def send(self, stream_id: int, data: bytes, end: bool = False) -> int:
        """Send as much of `data` as the windows allow now; returns the bytes sent."""
        window = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
        chunk = data[: max(0, window)]
        if chunk or end:
            self.h2.send_data(stream_id, chunk, end_stream=end and len(chunk) == len(data))
            self.flush()
        return len(chunk)

    def reset(self, stream_id: int) -> None:
        self.h2.reset_stream(stream_id)
        self.flush()

    def pump(self, wait_s: float = 0.05) -> bool:
        """Read whatever arrives within `wait_s`; False once the server closed the connection."""
        if self.closed:
            return False
        self.sock.settimeout(wait_s)
        try:
            data = self.sock.recv(65536)
        except (TimeoutError, ssl.SSLWantReadError):
            return True
        except (ConnectionError, ssl.SSLError, OSError):
            self.closed = True
            return False
        if not data:
            self.closed = True
            return False
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.closed = True
            return False
        for event in events:
            self._on(event)
        self.flush()
        return not self.closed

    def _on(self, event: h2.events.Event) -> None:
        seen = self.streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.ResponseReceived) and seen is not None:
            headers = {k.decode(): v.decode() for k, v in event.headers or []}
            seen.status = int(headers.pop(":status"))
            seen.headers = headers
        elif isinstance(event, h2.events.DataReceived) and seen is not None:
            seen.body += event.data or b""
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded) and seen is not None:
            seen.ended = True
        elif isinstance(event, h2.events.StreamReset) and seen is not None:
            seen.reset = True
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = event
            self.closed = True

    def until(self, condition: object, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():  # type: ignore[operator]
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout_s} s")
            if not self.pump() and not condition():  # type: ignore[operator]
                raise AssertionError("the connection closed first")

    def close(self) -> None:
        self.closed = True
        self.sock.close()
