"""Fixtures for the server tests: real `python -m tts_server` processes on free loopback ports.

Each server is a fresh process with the real offline Kokoro weights (about 10 s to load and
warm up on a shared 2-core machine), so servers are shared per session where the settings
allow, and stopped (SIGTERM, then SIGKILL) when the session ends.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 240.0  # SageMaker allows 4 min to pass health; so do we


class ServerProcess:
    """One `python -m tts_server --port 0` child; its stdout JSON lines collected as they come."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        inherited = {k: v for k, v in os.environ.items() if k != "MAX_QUEUE_DEPTH"}
        full_env = {
            **inherited,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")]),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tts_server", "--host", "127.0.0.1", "--port", "0"],
            cwd=REPO,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._lines: list[dict[str, Any]] = []
        self._raw: list[str] = []
        self._new: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        listening = self.wait_for(lambda r: r.get("msg") == "listening", timeout=60)
        self.port: int = listening["port"]
        self.base = f"http://127.0.0.1:{self.port}"
        self.listening_after_s = time.monotonic() - self.started

    def _read(self) -> None:
        if self.proc.stdout is None:
            return
        for line in self.proc.stdout:
            self._raw.append(line)
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = {"msg": "__not_json__", "line": line}
            self._lines.append(record)
            self._new.put(record)

    @property
    def records(self) -> list[dict[str, Any]]:
        return list(self._lines)

    @property
    def raw_lines(self) -> list[str]:
        return list(self._raw)

    def wait_for(self, predicate: Any, timeout: float) -> dict[str, Any]:
        """The first record (seen so far or arriving) for which `predicate` holds."""
        for record in self.records:
            if predicate(record):
                return record
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                record = self._new.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            if predicate(record):
                return record
        raise TimeoutError(
            f"no matching server log line within {timeout} s (exit {self.proc.poll()})"
        )

    def wait_ready(self) -> None:
        self.wait_for(lambda r: r.get("marker") == "ready", timeout=READY_TIMEOUT_S)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=35)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """An unbounded server with default settings, ready."""
    process = ServerProcess()
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def bounded_server() -> Iterator[ServerProcess]:
    """A server with MAX_QUEUE_DEPTH=2, ready; one module uses it, so it ends with it
    (each server holds about 0.9 GB)."""
    process = ServerProcess({"MAX_QUEUE_DEPTH": "2"})
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture
def start_server() -> Iterator[Any]:
    """Start a server with extra env for one test; stopped after it."""
    started: list[ServerProcess] = []

    def start(env: dict[str, str] | None = None) -> ServerProcess:
        process = ServerProcess(env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
