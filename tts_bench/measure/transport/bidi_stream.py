"""The bidi-stream transport's client side: the AWS SDK's HTTP/2 client in a worker process.

The SDK (`aws-sdk-sagemaker-runtime-http2`) needs Python ≥ 3.12 and asyncio; the project runs
on 3.11 (the CPU torch wheel) and Locust on gevent. So `loadtest/bidi_worker.py` runs the SDK
under `.venv-http2/bin/python` (made by `scripts/bootstrap`), one asyncio loop for every session
of this process, and `BidiWorker` talks to it over its stdin/stdout in JSON lines. A reader
thread hands each message to the session it names. Under Locust's monkey-patching the
subprocess pipes, the thread and the queues are gevent's, so a user blocked on its queue
yields to the others; in plain Python (tests, scripts) they are ordinary threads.

Turns are timed in the worker, where the bytes arrive: TTFAB and latency come back with each
turn, measured on the worker's clocks from the moment its request event was sent.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tts_bench.errors import RefusalError, TtsBenchError

REPO_ROOT = Path(__file__).resolve().parents[3]
HTTP2_VENV = REPO_ROOT / ".venv-http2"
WORKER_SCRIPT = REPO_ROOT / "loadtest" / "bidi_worker.py"
READY_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 10.0


class BidiWorkerError(TtsBenchError):
    """The HTTP/2 worker process died or stopped answering."""


def http2_python(venv: Path = HTTP2_VENV) -> Path:
    """The interpreter that carries the HTTP/2 SDK; refuses in one line when there is none."""
    python = venv / "bin" / "python"
    if not (python.is_file() and (venv / ".tts-bench-installed").is_file()):
        raise RefusalError(
            "bidi-stream needs Python >= 3.12 for the AWS SDK's HTTP/2 client, and "
            f"{venv} is missing: install python3.12 (or newer) and run scripts/bootstrap"
        )
    return python


@dataclass(frozen=True)
class TurnResult:
    """One request on a session, as the worker timed it."""

    context_id: str
    outcome: str  # ok | error | rejected | cancelled (tts_bench.measure.samples.Outcome values)
    ttfab_ms: float | None
    latency_ms: float
    detail: str
    audio_bytes: int
    server_first_chunk_ms: float | None

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> TurnResult:
        server_ms = message.get("server_first_chunk_ms")
        return cls(
            context_id=str(message["context_id"]),
            outcome=str(message["outcome"]),
            ttfab_ms=message.get("ttfab_ms"),
            latency_ms=float(message["latency_ms"]),
            detail=str(message.get("detail", "")),
            audio_bytes=int(message.get("audio_bytes", 0)),
            server_first_chunk_ms=float(server_ms) if isinstance(server_ms, int | float) else None,
        )


class BidiSession:
    """One bidirectional stream in the worker; its messages arrive on `inbox` in order."""

    def __init__(self, worker: BidiWorker, name: str, keep_log: bool = False) -> None:
        self.worker, self.name = worker, name
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.closed: dict[str, Any] | None = None
        self.keep_log = keep_log
        self.log: list[dict[str, Any]] = []  # every message read, when keep_log

    def next_message(self, timeout_s: float) -> dict[str, Any]:
        try:
            message = self.inbox.get(timeout=timeout_s)
        except queue.Empty:
            raise BidiWorkerError(
                f"session {self.name}: nothing from the HTTP/2 worker in {timeout_s:.0f} s"
            ) from None
        if message.get("kind") in ("closed", "failed"):  # a session that never opened is over too
            self.closed = message
        if self.keep_log:
            self.log.append(message)
        return message

    def wait_opened(self, timeout_s: float) -> None:
        """Wait for the stream to open; an SDK error (no instance, …) becomes a TtsBenchError."""
        message = self.next_message(timeout_s)
        if message["kind"] != "opened":
            raise BidiWorkerError(f"{message.get('error')}: {message.get('message')}")

    def send(self, body: Mapping[str, Any]) -> None:
        self.worker.command("send", self.name, body=dict(body))

    def cancel(self, context_id: str) -> None:
        self.worker.command("cancel", self.name, context_id=context_id)

    def turn(self, body: Mapping[str, Any], timeout_s: float) -> TurnResult:
        """Send one request and wait for its turn to end (events for other contexts skipped)."""
        context_id = str(body["context_id"])
        self.send(body)
        while True:
            message = self.next_message(timeout_s)
            if message["kind"] == "turn" and message["context_id"] == context_id:
                return TurnResult.of(message)
            if message["kind"] in ("closed", "failed"):
                raise BidiWorkerError(
                    f"session {self.name} closed: {message.get('error')}: {message.get('message')}"
                )

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> dict[str, Any]:
        """End the input and wait for the stream to end; returns the worker's `closed` message."""
        if self.closed is None:
            self.worker.command("close", self.name)
            while self.closed is None:
                self.next_message(timeout_s)
        self.worker.forget(self.name)
        return self.closed


class BidiWorker:
    """The HTTP/2 SDK worker process: start it, open sessions on it, stop it."""

    def __init__(self, env: Mapping[str, str] | None = None, python: Path | None = None) -> None:
        self.python = python or http2_python()
        self.env = dict(os.environ if env is None else env)
        self.process: subprocess.Popen[str] | None = None
        self.sessions: dict[str, BidiSession] = {}
        self._names = itertools.count(1)
        self._write_lock = threading.Lock()
        self._ready: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader: threading.Thread | None = None

    def start(self) -> BidiWorker:
        # The worker reads events with this checkout's `measure.transport.stream_events`.
        paths = [str(REPO_ROOT), *filter(None, [self.env.get("PYTHONPATH")])]
        self.process = subprocess.Popen(
            [str(self.python), str(WORKER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**self.env, "PYTHONPATH": os.pathsep.join(paths)},
        )
        self._reader = threading.Thread(target=self._read, name="bidi-worker-out", daemon=True)
        self._reader.start()
        try:
            self._ready.get(timeout=READY_TIMEOUT_S)
        except queue.Empty:
            self.stop()
            raise BidiWorkerError(
                f"the HTTP/2 worker did not start in {READY_TIMEOUT_S:.0f} s"
            ) from None
        return self

    def _read(self) -> None:
        stream = self.process.stdout if self.process else None
        for line in stream or ():
            message = json.loads(line)
            if message.get("kind") == "ready":
                self._ready.put(message)
            elif (session := self.sessions.get(str(message.get("session")))) is not None:
                session.inbox.put(message)
        # The worker is gone: every open session hears it once.
        for session in list(self.sessions.values()):
            session.inbox.put(
                {"kind": "closed", "session": session.name, "error": "WorkerExited", "message": ""}
            )

    def command(self, op: str, session: str, **fields: Any) -> None:
        if self.process is None or self.process.stdin is None or self.process.poll() is not None:
            raise BidiWorkerError("the HTTP/2 worker is not running")
        line = json.dumps({"op": op, "session": session, **fields}) + "\n"
        with self._write_lock:
            self.process.stdin.write(line)
            self.process.stdin.flush()

    def open(self, endpoint: str, events: bool = False) -> BidiSession:
        """Open a session on `endpoint` (no wait: `wait_opened` or the first turn says how it went).

        With `events`, every container event comes back too (`{"kind": "event", …}`), and the
        session keeps a `log` of every message it reads.
        """
        session = BidiSession(self, f"s{next(self._names)}", keep_log=events)
        self.sessions[session.name] = session
        self.command("open", session.name, endpoint=endpoint, events=events)
        return session

    def forget(self, name: str) -> None:
        self.sessions.pop(name, None)

    def stop(self) -> None:
        """Close stdin (the worker closes its sessions and exits), then wait; kill if it hangs."""
        process = self.process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=CLOSE_TIMEOUT_S)
        self.process = None

    def __enter__(self) -> BidiWorker:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
