"""The model in a process of its own: the server's threads never hold its interpreter lock.

In one process the thread that launches a forward pass's kernels shares one interpreter lock
with the event loop, G2P and the encoders; every switch to them leaves the GPU waiting. Here
the backend and its `InferenceScheduler` (batching, length bucketing, aborts) run in a child
process (`python -m tts_server.engine.engine_process`), and the server keeps HTTP, WebSocket,
G2P and encoding. They talk over one Unix socket pair, pickled messages framed by
`multiprocessing.connection.Connection`:

    server -> engine: ("warm",) ("item", key, token_ids, style, speed) ("end", key) ("close",)
    engine -> server: ("loaded", vocab, voices) ("warmed", seconds) ("failed", error)
                      ("out", key, audio, durations, started, stats) ("error", key, message)
                      ("closed",)

`stats` is (segments completed, passes, busy seconds). The queue lives beside the model, so
the next pass starts the moment one ends, with no round trip. A segment's audio (about 330 kB
for 3.4 s) crosses the socket once. The child ignores SIGINT and SIGTERM: the server drains
first and then closes it. It leaves by itself when the socket closes, so a server that dies
takes its engine with it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tts_server.engine.backend import InferenceItem, InferenceOutput
from tts_server.engine.base import EngineError

CLOSE_WAIT_S = 3.0  # for the child to answer `close` before it is killed


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """Which backend the child opens, with the front's resolved settings."""

    backend: str
    model_dir: str | None = None
    device: str | None = None
    max_batch: int | None = None


class _Channel:
    """One end of the socket pair: sends from any thread, one at a time."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._send_lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            self.connection.send(message)

    def recv(self) -> tuple[Any, ...] | None:
        """The next message, or None once the other end is gone."""
        try:
            return self.connection.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            return None


class EngineProcess:
    """The server's side: starts the child, hands it segments, resolves their futures.

    A `SegmentRunner`: `run` queues a segment in the child and awaits its output; cancelling
    the await ends the segment there (dropped if still queued, the pass aborted where the
    backend can stop one once none of its segments is wanted).
    """

    def __init__(self, process: subprocess.Popen[bytes], channel: _Channel) -> None:
        self._process = process
        self._channel = channel
        self._keys = itertools.count()
        self._pending: dict[int, Future[InferenceOutput]] = {}
        self._lock = threading.Lock()
        self._replies: queue.Queue[tuple[Any, ...]] = queue.Queue()  # loaded, warmed, closed …
        self._gone: str | None = None
        self._closing = False
        self.completed = 0
        self.passes = 0
        self.busy_s = 0.0
        self._reader = threading.Thread(target=self._read, name="engine-reader", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, spec: ProcessSpec) -> EngineProcess:
        """Spawn the child on one end of a fresh socket pair (blocking: call off the loop)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = [
            sys.executable, "-m", "tts_server.engine.engine_process",
            "--fd", str(theirs.fileno()), "--spec", json.dumps(asdict(spec)),
        ]  # fmt: skip
        try:
            process = subprocess.Popen(
                command,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno(),  # the server's stdout carries JSON log lines only
                env={**os.environ, "PYTHONPATH": _child_path()},
            )
        finally:
            theirs.close()
        return cls(process, _Channel(Connection(ours.detach())))

    # ------------------------------------------------------------------ replies

    on_gone: Callable[[str], None] | None = None  # told (on the reader thread) if the child dies

    def _read(self) -> None:
        while (message := self._channel.recv()) is not None:
            kind = message[0]
            if kind == "out":
                _, key, audio, durations, started, stats = message
                self.completed, self.passes, self.busy_s = stats
                future = self._take(key)
                if future is not None and not future.done():
                    future.set_result(InferenceOutput(audio, durations, started))
            elif kind == "error":
                future = self._take(message[1])
                if future is not None and not future.done():
                    future.set_exception(EngineError(message[2]))
            else:
                self._replies.put(message)
        code = self._process.wait()
        self._gone = f"the engine process exited (code {code})"
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(EngineError(self._gone))
        self._replies.put(("gone", self._gone))
        if self.on_gone is not None and not self._closing:
            self.on_gone(self._gone)

    def _take(self, key: int) -> Future[InferenceOutput] | None:
        with self._lock:
            return self._pending.pop(key, None)

    def _reply(self, *kinds: str, timeout: float | None = None) -> tuple[Any, ...]:
        try:
            message = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise EngineError(f"the engine process sent no {'/'.join(kinds)}") from None
        if message[0] == "failed":
            raise EngineError(message[1])
        if message[0] == "gone":
            raise EngineError(message[1])
        if message[0] not in kinds:
            raise EngineError(f"the engine process sent {message[0]!r}, not {kinds}")
        return message

    # ------------------------------------------------------------------ SegmentRunner

    def loaded(self) -> Any:
        """Wait for the child to load its weights; the engine's `LoadedModel`."""
        from tts_server.engine.kokoro_engine import LoadedModel

        try:
            _, vocab, voices = self._reply("loaded")
        except EngineError:
            self.close()
            raise
        return LoadedModel(self, vocab, voices)

    def warm(self) -> float:
        self._send(("warm",))
        return float(self._reply("warmed")[1])

    def submit(self, item: InferenceItem) -> tuple[int, Future[InferenceOutput]]:
        future: Future[InferenceOutput] = Future()
        key = next(self._keys)
        with self._lock:
            if self._gone:
                raise EngineError(self._gone)
            self._pending[key] = future
        self._send(("item", key, item.token_ids, item.style, item.speed))
        return key, future

    async def run(self, item: InferenceItem) -> InferenceOutput:
        import asyncio

        key, future = self.submit(item)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if self._take(key) is not None:
                self._send(("end", key))
            raise

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self._channel.send(message)
        except OSError as exc:
            raise EngineError(self._gone or f"the engine process is gone ({exc})") from None

    def close(self) -> None:
        """Ask the child to stop, wait a little, then kill it."""
        self._closing = True
        if self._process.poll() is None:
            try:
                self._channel.send(("close",))
                self._process.wait(timeout=CLOSE_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._channel.connection.close()

    @property
    def pid(self) -> int:
        return self._process.pid


def _child_path() -> str:
    """The server's PYTHONPATH with the folder holding `tts_server` in front: the child
    imports what the server imported, however the server was started."""
    import tts_server

    package_root = str(Path(tts_server.__file__).resolve().parents[1])
    return os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)


# ---------------------------------------------------------------------- the child


def _serve(channel: _Channel, spec: ProcessSpec) -> int:
    """The child's life: open the backend, then take messages until `close` or EOF."""
    from tts_server.engine.opening import open_backend
    from tts_server.engine.scheduler import InferenceScheduler

    try:
        backend, vocab, voices = open_backend(
            spec.backend,  # type: ignore[arg-type]
            Path(spec.model_dir) if spec.model_dir else None,
            spec.device,
            spec.max_batch,
        )
    except Exception as exc:  # the server reports it and exits: this container cannot serve
        channel.send(("failed", f"{type(exc).__name__}: {exc}"))
        return 1
    scheduler = InferenceScheduler(backend)
    channel.send(("loaded", vocab, voices))
    futures: dict[int, Future[InferenceOutput]] = {}
    done: queue.Queue[int | None] = queue.Queue()

    def send_done() -> None:  # off the worker thread: a pass never waits on the socket
        while (key := done.get()) is not None:
            future = futures.pop(key, None)
            if future is None or future.cancelled():
                continue
            stats = (scheduler.completed, scheduler.passes, scheduler.busy_s)
            try:
                exc = future.exception()
                if exc is not None:
                    channel.send(("error", key, str(exc)))
                else:
                    out = future.result()
                    channel.send(("out", key, out.audio, out.durations, out.started, stats))
            except OSError:
                return  # the server is gone; the reader sees it too

    sender = threading.Thread(target=send_done, name="engine-sender", daemon=True)
    sender.start()
    while (message := channel.recv()) is not None:
        kind = message[0]
        if kind == "item":
            _, key, token_ids, style, speed = message
            future = scheduler.submit(InferenceItem(token_ids, style, speed))
            futures[key] = future
            future.add_done_callback(lambda _f, key=key: done.put(key))
        elif kind == "end":
            future = futures.pop(message[1], None)
            if future is not None:
                scheduler.end(future)
        elif kind == "warm":
            try:
                channel.send(("warmed", scheduler.warm()))
            except Exception as exc:
                channel.send(("failed", f"warm-up failed: {type(exc).__name__}: {exc}"))
        elif kind == "close":
            break
    scheduler.close()
    done.put(None)
    with contextlib.suppress(OSError):
        channel.send(("closed",))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The engine's own process (started by the server)")
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair")
    parser.add_argument("--spec", required=True, help="ProcessSpec as JSON")
    args = parser.parse_args(argv)
    # The server drains on SIGTERM/SIGINT, then closes this process; a signal sent to the
    # whole group must not take the model away from the requests still finishing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    channel = _Channel(Connection(args.fd))
    started = time.monotonic()
    code = _serve(channel, ProcessSpec(**json.loads(args.spec)))
    print(f"engine process: exit {code} after {time.monotonic() - started:.1f} s", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # worker threads may still be inside a pass that nobody awaits


if __name__ == "__main__":
    sys.exit(main())
