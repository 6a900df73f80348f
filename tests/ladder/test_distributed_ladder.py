"""The distributed ladder: one Locust master and one worker process on loopback.

The first test runs against the session's real server over the WebSocket transport (curve
instances serve /invocations only, so it stays on Kokoro; one rung of one user, which a 1 ms SLO
fails). The second pauses its worker longer than Locust's own heartbeat tolerance, against a
curve instance over HTTP; the third checks that the installed Locust and pyzmq take the two
settings that make that survivable (`loadtest/worker_link.py`)."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.measure.samples import read_samples, samples_path

from .conftest import CORPORA, CURVE_RATE_RPS, LOCUSTFILE, REPO

pytestmark = pytest.mark.slow

# The window (the hold less 6 s for the worker to connect and its user to start) is three lone
# requests long as the machine runs now, at least 4 s: a few finished requests however loaded.
WINDOW_PER_LONE_REQUEST, MIN_WINDOW_S, WARM_UP_S = 3.0, 4.0, 6.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Pair:
    """A master and its one worker; the master's lines as they come, the worker's in a file."""

    master: subprocess.Popen[str]
    worker: subprocess.Popen[bytes]
    worker_log: Path
    lines: list[str] = field(default_factory=list)

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in self.lines):
            if time.monotonic() > deadline or self.master.poll() is not None:
                pytest.fail(f"the master never printed {text!r}:\n{self.output()}")
            time.sleep(0.1)

    def output(self) -> str:
        """The master's last lines, then the worker's (what a failure needs to be read)."""
        worker = self.worker_log.read_text(errors="replace") if self.worker_log.exists() else ""
        return "".join(self.lines)[-3000:] + "\n--- worker ---\n" + worker[-2000:]


@contextmanager
def master_and_worker(
    host: str, ladder: list[str], out: Path, env: dict[str, str]
) -> Iterator[Pair]:
    """Start both on loopback; on leaving, wait for both to end (killing what outlives that)."""
    port = free_port()
    common = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    master = subprocess.Popen(
        [
            *common, "--master", "--headless", "--expect-workers", "1",
            "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--host", host,
            *ladder, "--out", str(out),
        ],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    worker_log = out / "worker.log"
    with worker_log.open("wb") as log:
        worker = subprocess.Popen(
            [*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    pair = Pair(master, worker, worker_log)
    assert master.stdout is not None
    reader = threading.Thread(target=lambda: pair.lines.extend(master.stdout), daemon=True)
    reader.start()
    try:
        yield pair
        master.wait(timeout=180)
        worker.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a paused worker cannot die otherwise
                process.kill()
                process.wait()


def test_distributed_ladder_stops_after_the_first_failing_rung(server, child_env, tmp_path):
    """One master and one worker process on loopback, the WebSocket transport, a 1 ms SLO.

    The hold scales with a lone request as the machine runs now, so the c=1 window holds a few
    finished requests however loaded (a clone's fixed 8 s window once finished none)."""
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ttotal.probe import speak

    lone = [speak(server.url, u) for u in load_corpus(CORPORA / "short.txt")[:2]]
    assert all(s.ok for s in lone), [s.detail for s in lone]
    window_s = max(MIN_WINDOW_S, WINDOW_PER_LONE_REQUEST * max(s.end - s.start for s in lone))
    hold_s = WARM_UP_S + window_s
    ladder = [
        "--transport", "local-ws", "--rungs", "1,2", "--hold-s", f"{hold_s:.0f}",
        "--measure-s", f"{window_s:.0f}", "--idle-s", "1", "--slo-ms", "1",
        "--corpus", str(CORPORA / "short.txt"),
    ]  # fmt: skip
    with master_and_worker(server.url, ladder, tmp_path, child_env) as pair:
        pass
    assert pair.master.returncode == 0, pair.output()
    (path,) = tmp_path.glob("qmax-kokoro-82m-local-ws-*.json")
    artifact = load_artifact(path, QmaxArtifact)
    # c=1 misses a 1 ms SLO: the ladder stops there, and that failure brackets Q_max (none).
    assert [r.concurrency for r in artifact.rungs] == [1]
    assert artifact.rungs[0].usable, artifact.rungs[0].unusable_reason
    assert not artifact.rungs[0].meets_slo
    assert (artifact.q_max, artifact.bracketed) == (None, True)
    workers = {s.worker for s in read_samples(samples_path(path))}
    assert workers == {f"{socket.gethostname()}:{pair.worker.pid}"}  # the worker's only
    assert pair.master.pid != pair.worker.pid
    assert os.getpid() not in (pair.master.pid, pair.worker.pid)
    assert "rung 1/2 c=1" in "".join(pair.lines)  # progress was shown


# The worker is paused for twice Locust's own tolerance (3 heartbeats missed: missing after
# about 4 s), inside the ladder's (`loadtest/worker_link.py`: 15). It is paused half a second
# after the master hears its user run (Locust's "All users spawned", 1-3 s into the rung), so
# it resumes 11-13 s into the 17 s hold, before the 3 s window opens. A request takes 20 ms
# on average, so the half second holds a few dozen before the pause.
PAUSE_S, PAUSED_HOLD_S, PAUSED_WINDOW_S = 9.0, 17.0, 3.0


def test_a_worker_silent_longer_than_locusts_own_tolerance_does_not_end_the_ladder(
    child_env, tmp_path
):
    """A worker paused (SIGSTOP) for 9 s mid-rung is still in the ladder when it resumes.

    Stop 50's CI: a master on a loaded machine called its live worker missing five seconds into
    c=1 and stopped the test, which wrote nothing."""
    from tts_bench.local_cloud.instances.serial_curve import serial_curve

    ladder = [
        "--transport", "local-http", "--rungs", "1", "--hold-s", f"{PAUSED_HOLD_S:g}",
        "--measure-s", f"{PAUSED_WINDOW_S:g}", "--idle-s", "1", "--slo-ms", "60000", "--curve-check",
    ]  # fmt: skip
    with (
        serial_curve(CURVE_RATE_RPS, 1.0, seed=5, chunks=2) as url,
        master_and_worker(url, ladder, tmp_path, child_env) as pair,
    ):
        pair.wait_for("All users spawned", timeout_s=120)
        time.sleep(0.5)
        pair.worker.send_signal(signal.SIGSTOP)
        time.sleep(PAUSE_S)
        pair.worker.send_signal(signal.SIGCONT)
    assert pair.master.returncode == 0, pair.output()
    assert "went missing" not in "".join(pair.lines), pair.output()
    (path,) = tmp_path.glob("qmax-*.json")
    (rung,) = load_artifact(path, QmaxArtifact).rungs
    assert rung.usable and rung.meets_slo, rung.unusable_reason
    # The pause fell inside the test: no request started for as long as it lasted.
    starts = sorted(s.start for s in read_samples(samples_path(path)))
    assert max(b - a for a, b in itertools.pairwise(starts)) >= PAUSE_S - 0.5


def test_the_installed_locust_and_pyzmq_take_both_settings(child_env):
    """`worker_link` sets a Locust constant and a pyzmq class setting, and skips the latter
    where pyzmq lacks it: an upgrade that renamed either would bring the 4 s and 11.6 s back
    without a word, so the versions installed must show both values set."""
    probe = (
        "import sys; sys.path.insert(0, 'loadtest'); import worker_link as w; "
        "w.tolerate_busy_workers(); import locust.runners as r, zmq.green.core as z; "
        "print(r.HEARTBEAT_LIVENESS, z._Socket._gevent_bug_timeout)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=child_env, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    liveness, wake_up_s = out.stdout.split()
    assert (int(liveness), float(wake_up_s)) == (15, 0.5)
