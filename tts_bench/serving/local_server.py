"""A local `python -m tts_server` process: start it, read its JSON log, wait for ready, stop it.

The server logs one JSON object per line on stdout (contracts.md): a `listening` line with
the bound port (so it can be started on port 0), and its start-up markers with wall-clock
timestamps. A reader thread keeps every parsed line, so callers can time the stages as they
happen. `stop()` sends SIGTERM (the server drains), then kills it if it is still there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tts_bench.errors import TtsBenchError
from tts_bench.serving.server_ping import PingError, PingStatus, fetch_ping

DRAIN_WAIT_S = 35.0  # the server exits within 30 s of SIGTERM (SageMaker's SIGKILL deadline)


class LocalServerError(TtsBenchError):
    """The local server did not start, did not become ready, or exited early."""


class LocalServer:
    """One server process on loopback. Use as a context manager so it is always stopped."""

    def __init__(
        self,
        server_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.server_args = list(server_args)
        self.env = env
        self.log_path = log_path
        self.on_line = on_line  # each stdout line as read (the local cloud ships them to Logs)
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[dict[str, Any]] = []
        self.spawned_at: float | None = None
        self._changed = threading.Condition()
        self._reader: threading.Thread | None = None

    # ------------------------------------------------------------------ life cycle

    def start(self) -> LocalServer:
        command = [sys.executable, "-m", "tts_server", "--host", "127.0.0.1", "--port", "0"]
        self.spawned_at = time.time()
        self.process = subprocess.Popen(
            [*command, *self.server_args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
            start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop it
        )
        self._reader = threading.Thread(target=self._read, name="tts-server-log", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        stream = self.process.stdout if self.process else None
        log = open(self.log_path, "a", encoding="utf-8") if self.log_path else None  # noqa: SIM115
        try:
            for raw in stream or ():
                if log:
                    log.write(raw)
                    log.flush()
                if self.on_line:
                    self.on_line(raw)
                try:
                    entry = json.loads(raw)
                except ValueError:
                    entry = {"msg": "unparsed", "text": raw.rstrip("\n")}
                if not isinstance(entry, dict):
                    entry = {"msg": "unparsed", "text": raw.rstrip("\n")}
                entry["_received"] = time.time()
                with self._changed:
                    self.lines.append(entry)
                    self._changed.notify_all()
        finally:
            if log:
                log.close()
            if stream is not None:
                # Read to its end: closed here, not when the Popen is collected (a local cloud
                # keeps its stopped instances, and kept one descriptor per instance it ran).
                stream.close()
            with self._changed:
                self._changed.notify_all()

    def stop(self) -> int | None:
        """SIGTERM, wait for the drain, then SIGKILL; returns the exit code."""
        process = self.process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=DRAIN_WAIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(timeout=10)

    def __enter__(self) -> LocalServer:
        return self if self.process else self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ reading

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float, what: str
    ) -> dict[str, Any]:
        """The first log line matching `predicate`, waiting up to `timeout_s`."""
        deadline = time.time() + timeout_s
        seen = 0
        with self._changed:
            while True:
                for entry in self.lines[seen:]:
                    if predicate(entry):
                        return entry
                seen = len(self.lines)
                if self.process is None or self.process.poll() is not None:
                    raise LocalServerError(
                        f"the server exited (code {self.process and self.process.returncode}) "
                        f"before {what}; its last lines: {self.tail()}"
                    )
                left = deadline - time.time()
                if left <= 0:
                    raise LocalServerError(f"no {what} within {timeout_s:.0f} s: {self.tail()}")
                self._changed.wait(timeout=min(left, 1.0))

    @property
    def port(self) -> int:
        return int(
            self.wait_for(lambda e: e.get("msg") == "listening", 60, "listening line")["port"]
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def markers(self) -> dict[str, float]:
        """Start-up markers logged so far: name → the server's own timestamp."""
        with self._changed:
            return {
                str(e["marker"]): float(e["ts"])
                for e in self.lines
                if e.get("msg") == "startup_marker" and "marker" in e and "ts" in e
            }

    def wait_ready(
        self, timeout_s: float = 600.0, progress: Callable[[str], None] | None = None
    ) -> PingStatus:
        """Wait for the `ready` marker, then confirm with /ping; report markers as they come."""
        reported: set[str] = set()
        deadline = time.time() + timeout_s

        def ready_or_new(entry: dict[str, Any]) -> bool:
            marker = entry.get("marker")
            if entry.get("msg") == "startup_marker" and marker not in reported and progress:
                reported.add(str(marker))
                progress(f"server start-up: {marker} after {entry['ts'] - self.spawned_at:.1f} s")
            return entry.get("msg") == "startup_marker" and marker == "ready"

        self.wait_for(ready_or_new, max(1.0, deadline - time.time()), "the ready marker")
        while True:
            try:
                ping = fetch_ping(self.url)
            except PingError:
                ping = None
            if ping is not None and ping.ready:
                return ping
            if time.time() > deadline:
                raise LocalServerError(f"{self.url}/ping never turned ready")
            time.sleep(0.2)

    def tail(self, count: int = 5) -> str:
        with self._changed:
            last = self.lines[-count:]
        return " | ".join(
            json.dumps({k: v for k, v in e.items() if k != "_received"}) for e in last
        )
