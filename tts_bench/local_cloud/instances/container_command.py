"""Instances that run any container command keeping SageMaker's contract (`--container-cmd`).

SageMaker runs a container and talks to it over HTTP: `GET /ping` (200 once it serves) and
`POST /invocations` (both InvokeEndpoint and InvokeEndpointWithResponseStream reach it there).
A container listens on 8080 unless SageMaker gives it another port in `SAGEMAKER_BIND_TO_PORT`,
as it does when several containers share a host. Each instance here is the command as given,
started per instance on a free loopback port that it is told in two ways: the environment
variable `SAGEMAKER_BIND_TO_PORT` (what a SageMaker container reads), and `{port}` in any word
of the command, replaced by the number (for a server that takes its port as a flag). Its
environment is this machine's plus the deployed Model's. Its output (stdout and stderr, as
CloudWatch gets a container's) is shipped line by line; it is ready once `/ping` answers 200.
Nothing else is asked of it: no start-up markers, no log format.

The image digest it stands for (`command_digest`) is a hash of the command and of the bytes
of every file its words name, so an edit to a script it runs is another image.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from tts_bench.local_cloud.errors import LocalCloudError
from tts_bench.local_cloud.instances.fleet import InstanceStartError, Launch
from tts_bench.local_cloud.orphans import ProcessRecord
from tts_bench.serving.local_server import DRAIN_WAIT_S

PORT_ENV = "SAGEMAKER_BIND_TO_PORT"
PORT_PLACEHOLDER = "{port}"
TAIL_LINES = 3  # the last output lines an error names
PING_TIMEOUT_S = 2.0  # SageMaker's: a /ping slower than this is a failed health check
PING_EVERY_S = 0.2


def parse_command(command: str) -> list[str]:
    """The command's words; one `LocalCloudError` line when it is empty, unbalanced or its
    program cannot be found."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise LocalCloudError(f"--container-cmd {command!r}: {exc}") from None
    if not words:
        raise LocalCloudError("--container-cmd: give the command that starts the container")
    if shutil.which(words[0]) is None:
        raise LocalCloudError(
            f"--container-cmd {command!r}: no program {words[0]!r} (not a path to an "
            "executable, nor on PATH)"
        )
    return words


def command_digest(words: Sequence[str]) -> str:
    """`sha256:` over the command's words and the bytes of each word that names a file."""
    digest = hashlib.sha256()
    for word in words:
        digest.update(word.encode("utf-8") + b"\0")
        path = Path(word)
        if path.is_file():
            with path.open("rb") as named:  # streamed: a word may name a large file (weights)
                digest.update(hashlib.file_digest(named, "sha256").digest())
    return "sha256:" + digest.hexdigest()


def free_port() -> int:
    """A loopback port free now (the container binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class CommandServer:
    """One instance of the container command, as an `InstanceServer`."""

    def __init__(
        self,
        words: Sequence[str],
        env: dict[str, str],
        log_path: Path | None,
        on_line: Callable[[str], None],
        record: ProcessRecord | None = None,
    ) -> None:
        self.port = free_port()
        self.argv = [w.replace(PORT_PLACEHOLDER, str(self.port)) for w in words]
        self._env = {**env, PORT_ENV: str(self.port)}
        self._log_path = log_path
        self._on_line = on_line
        self._record = record
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._reader: threading.Thread | None = None
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, at_s: float | None = None) -> None:
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=self._env,
                start_new_session=True,  # stopped by the cloud's drain, not by a terminal's ^C
            )
        except OSError as exc:
            self._tail.append(f"{type(exc).__name__}: {exc.strerror or exc}")
            return
        if self._record is not None:
            self._record.add(self.process.pid)
        self._reader = threading.Thread(target=self._read, name="container-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        log = open(self._log_path, "a", encoding="utf-8") if self._log_path else None  # noqa: SIM115
        try:
            for line in self.process.stdout:
                if log:
                    log.write(line)
                    log.flush()
                self._on_line(line)
                if line.strip():
                    self._tail.append(line.strip())
        finally:
            if log:
                log.close()
            self.process.stdout.close()

    def _failed(self, why: str) -> InstanceStartError:
        if self._reader is not None:
            self._reader.join(timeout=2)  # its last lines, written before it exited
        last = " | ".join(self._tail) or "(no output)"
        return InstanceStartError(
            f"container command {shlex.join(self.argv)!r} {why}; last: {last}"
        )

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process is None:
                raise self._failed("did not start")
            if (code := self.process.poll()) is not None:
                raise self._failed(f"exited with code {code} before /ping answered 200")
            if self._ping_ok():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise self._failed(f"never answered GET /ping with 200 within {timeout_s:g} s")
            time.sleep(PING_EVERY_S)

    def _ping_ok(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=PING_TIMEOUT_S) as answer:
                return int(answer.status) == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def wait_exit(self) -> int | None:
        if self.process is None:
            return None
        code = self.process.wait()
        if self._record is not None:
            self._record.remove(self.process.pid)
        return code

    def stop(self) -> int | None:
        """SIGTERM as SageMaker sends it, SIGKILL past its deadline."""
        process = self.process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        os.killpg(process.pid, signal.SIGTERM)
        try:
            return process.wait(timeout=DRAIN_WAIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(timeout=10)

    def kill(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def command_launcher(
    words: Sequence[str], base_env: dict[str, str], record: ProcessRecord | None
) -> Launch:
    """The fleet's `launch` for container-command instances."""

    def launch(
        env: dict[str, str], log_path: Path | None, on_line: Callable[[str], None]
    ) -> CommandServer:
        return CommandServer(words, {**base_env, **env}, log_path, on_line, record)

    return launch
