"""Real `python -m tts_server` processes for tests: start one, read its JSON log as it comes.

The session fixtures in `tests/conftest.py` are built on it; a test that needs settings of its
own starts a `ServerProcess` itself (or through `start_server`) and stops it.
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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
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
        try:
            listening = self.wait_for(lambda r: r.get("msg") == "listening", timeout=60)
        except TimeoutError:
            self.stop()  # never leave a half-started child behind
            raise
        self.port: int = listening["port"]
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base  # the name the ladder's clients use
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

    def mark(self) -> int:
        """Where the log is now: `records[mark:]` are the lines logged after this call."""
        return len(self._lines)

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


def as_a_client_of_the_cloud(patch: Any, cloud_env: dict[str, str], state_dir: Path) -> None:
    """Point this process's AWS SDK and the CLI at a started local cloud, as its printed
    `export` lines would: its endpoint URLs and keys, no profile of the machine's, a state
    folder of the test's own, and the repository on the path of what the CLI starts.
    `patch` is a pytest MonkeyPatch, so all of it is undone with it."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        patch.delenv(name, raising=False)
    for name, value in cloud_env.items():
        patch.setenv(name, value)
    patch.setenv("TTS_BENCH_STATE_DIR", str(state_dir))
    paths = [str(REPO), str(REPO / "container"), os.environ.get("PYTHONPATH", "")]
    patch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
