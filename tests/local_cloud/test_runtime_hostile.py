"""Hostile clients at the runtime's wire: bodies that never come, clients that leave, malformed
HTTP, oversized and nested payloads, and a fuzz of whole raw requests. The runtime is real, on
loopback; the container behind it is scripted (`runtime_harness`) so each timing is exact, and
no model runs: the module takes about 6 s. The fuzz runs FUZZ_EXAMPLES examples (default 20):

    FUZZ_EXAMPLES=2000 python -m pytest tests/local_cloud/test_runtime_hostile.py -q
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.local_cloud.runtime_harness import (
    Harness,
    invoke_path,
    request_bytes,
    stream_path,
)
from tts_bench.local_cloud.data_plane.event_stream import MessageDecoder
from tts_bench.local_cloud.data_plane.runtime import MAX_BODY_BYTES

CEILING_S = 2.0


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    started = Harness(ceiling_s=CEILING_S).start()
    yield started
    started.stop()


@pytest.fixture
def quiet(harness: Harness, caplog: pytest.LogCaptureFixture) -> Iterator[Harness]:
    """The harness, idle before and after the test, and no error logged during it."""
    harness.wait_until(lambda: harness.router.in_flight == 0)
    # Windows from now take every sample reported so far (each is stamped before their end).
    harness.router.metrics.close_window(time.time())
    harness.router.metrics.close_window(time.time())
    with caplog.at_level(logging.WARNING):
        yield harness
    harness.wait_until(lambda: harness.router.in_flight == 0)
    harness.wait_until(lambda: harness.container.open_requests == 0)
    records = caplog.get_records("call") + caplog.get_records("teardown")
    errors = [r for r in records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]


def read_status(sock: socket.socket) -> int:
    head = b""
    while b"\r\n" not in head:
        data = sock.recv(4096)
        if not data:
            break
        head += data
    return int(head.split(b" ", 2)[1])


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and the whole body of a Content-Length response."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(lines[0].split(" ", 2)[1]), headers, body


def script(lines: int = 1, first_s: float = 0.0, every_s: float = 0.0) -> bytes:
    return json.dumps({"lines": lines, "first_s": first_s, "every_s": every_s}).encode()


@pytest.mark.parametrize("path", [stream_path(), invoke_path()])
def test_a_body_that_never_comes_holds_no_instance_and_no_metric(quiet: Harness, path: str) -> None:
    body = script()
    acquired = quiet.router.acquired
    with quiet.connect() as sock:
        sock.sendall(request_bytes(path, body)[:-3])  # all but the body's last 3 bytes
        time.sleep(0.5)
        assert quiet.router.in_flight == 0
        assert quiet.router.acquired == acquired
    assert quiet.router.metrics.close_window(time.time()).concurrency_max == 0


def test_a_body_that_stalls_past_the_ceiling_is_refused_holding_nothing(quiet: Harness) -> None:
    acquired = quiet.router.acquired
    with quiet.connect() as sock:
        sock.sendall(request_bytes(stream_path(), script())[:-3])
        sock.settimeout(CEILING_S + 5)
        status, headers, body = read_response(sock)
    assert status == 408
    assert headers["x-amzn-errortype"].startswith("ValidationError")
    assert "did not arrive" in json.loads(body)["Message"]
    assert quiet.router.acquired == acquired


@pytest.mark.parametrize("path", [stream_path(), invoke_path()])
def test_a_client_that_leaves_frees_its_instance_and_the_container_at_once(
    quiet: Harness, path: str
) -> None:
    """The client leaves while the container is silent (between its lines): nothing would
    tell the runtime but the closed connection itself."""
    with quiet.connect() as sock:
        sock.sendall(request_bytes(path, script(lines=3, first_s=0.0, every_s=30.0)))
        quiet.wait_until(lambda: quiet.container.open_requests == 1)
        if path == stream_path():
            assert read_status(sock) == 200
    freed_s = quiet.wait_until(lambda: quiet.router.in_flight == 0)
    closed_s = quiet.wait_until(lambda: quiet.container.open_requests == 0)
    assert freed_s < 0.5 and closed_s < 0.5, (freed_s, closed_s)


def test_a_finished_stream_is_payload_parts_and_releases_its_instance(quiet: Harness) -> None:
    with quiet.connect() as sock:
        sock.sendall(request_bytes(stream_path(), script(lines=3)))
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
    body = data.split(b"\r\n\r\n", 1)[1]
    payload, raw = b"", body
    while raw and not raw.startswith(b"0\r\n"):  # de-chunk
        size, rest = raw.split(b"\r\n", 1)
        payload, raw = payload + rest[: int(size, 16)], rest[int(size, 16) + 2 :]
    parts = [m.payload for m in MessageDecoder().feed(payload)]
    assert [json.loads(line) for line in b"".join(parts).splitlines()] == [
        {"line": 0},
        {"line": 1},
        {"line": 2},
    ]


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"POST /endpoints/scripted/invocations HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"POST /endpoints/scripted/invocations HTTP/1.1\r\nHost: x\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n\r\n",
    b"POST /endpoints/scripted/invocations HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"POST /endpoints/%ff%fe/invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    b"POST /endpoints/scripted/invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
    b"Content-Length: 2\r\n\r\n{}",
    b"POST /endpoints/scripted/invocations HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
    b"POST /endpoints/" + b"e" * 10000 + b"/invocations HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /endpoints/scripted/invocations HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    b"POST /endpoints/no-such/invocations-response-stream HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: 0\r\n\r\n",
    # A body its Content-Encoding does not decode (found by the fuzz below).
    b"POST /endpoints/scripted/invocations HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
    b"Content-Length: 4\r\n\r\nabcd",
]


@pytest.mark.parametrize("data", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_http_is_a_4xx_with_no_traceback(quiet: Harness, data: bytes) -> None:
    with quiet.connect() as sock:
        sock.sendall(data)
        assert 400 <= read_status(sock) < 500
    assert quiet.router.in_flight == 0


def test_a_body_over_six_mb_is_a_413_validation_error(quiet: Harness) -> None:
    acquired = quiet.router.acquired
    data = request_bytes(invoke_path(), b"x" * (MAX_BODY_BYTES + 1))
    with quiet.connect() as sock:
        # The runtime may answer and close before the last byte is sent.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        status, headers, answer = read_response(sock)
    assert status == 413
    assert headers["x-amzn-errortype"].startswith("ValidationError")
    assert "6 MB" in json.loads(answer)["Message"]
    assert quiet.router.acquired == acquired


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000, b"{" * 50_000, b'"\xff\xfe"', b"1e999999", b"null", b"[]"],
    ids=["deep-list", "deep-object", "not-utf8", "huge-number", "null", "list"],
)
def test_service_quotas_refuse_a_body_that_is_not_an_object(quiet: Harness, body: bytes) -> None:
    with quiet.connect() as sock:
        sock.sendall(
            request_bytes("/", body, {"X-Amz-Target": "ServiceQuotasV20190624.ListServiceQuotas"})
        )
        status, _, answer = read_response(sock)
    assert status == 400
    assert json.loads(answer)["__type"] == "SerializationException"


EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "20"))
TOKEN = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"),
    min_size=1,
    max_size=20,
)
HEADER_VALUE = st.one_of(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    st.sampled_from(["-1", "0", "99999999999999999999", "chunked", "gzip", "100-continue"]),
)


@st.composite
def raw_requests(draw: st.DrawFn) -> bytes:
    """A whole HTTP/1.1 request as a hostile client writes it: any method, any path (the
    endpoint's, another's, nonsense), headers from the ones that matter plus noise, a body that
    may be a script, garbage or cut short, framed by a length that may lie, or by chunks."""
    method = draw(st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE", "OPTIONS"]))
    endpoint = draw(st.sampled_from(["scripted", "scripted", "nope", "%ff", "a" * 300]))
    path = draw(st.sampled_from([stream_path(endpoint), invoke_path(endpoint), "/", "/ping", "//"]))
    body = draw(
        st.one_of(
            st.builds(script, st.integers(0, 3), st.just(0.0), st.just(0.0)),
            st.binary(max_size=300),
            st.just(b"[" * 5000),
        )
    )
    headers = [("Host", "local")]
    names = ["Content-Type", "Accept", "X-Amz-Target", "Expect", "Content-Encoding",
             "X-Amzn-SageMaker-Custom-Attributes", "Connection"]  # fmt: skip
    for _ in range(draw(st.integers(0, 3))):
        headers.append((draw(st.sampled_from(names) | TOKEN), draw(HEADER_VALUE)))
    framing = draw(st.sampled_from(["length", "length", "lying-length", "chunked", "none"]))
    if framing == "chunked":
        headers.append(("Transfer-Encoding", "chunked"))
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    elif framing != "none":
        lie = draw(st.integers(-3, 3)) if framing == "lying-length" else 0
        headers.append(("Content-Length", str(max(0, len(body) + lie))))
    head = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode() + body


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
@given(data=raw_requests())
def test_fuzz_raw_requests_never_get_a_5xx_nor_leave_an_instance_held(
    harness: Harness, caplog: pytest.LogCaptureFixture, data: bytes
) -> None:
    """Whatever comes in: an answer below 500 (or a closed connection, for a body that never
    completes), nothing held afterwards, nothing logged at error level."""
    with caplog.at_level(logging.WARNING):
        with harness.connect() as sock:
            sock.settimeout(CEILING_S + 5)
            with contextlib.suppress(ConnectionError):
                sock.sendall(data)
                head = sock.recv(65536)
                if head.startswith(b"HTTP/1."):
                    assert int(head.split(b" ", 2)[1]) < 500, head[:300]
        harness.wait_until(lambda: harness.router.in_flight == 0)
        harness.wait_until(lambda: harness.container.open_requests == 0)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]
