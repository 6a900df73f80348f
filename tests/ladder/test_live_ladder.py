"""The real ladder, headless, against a real local server (tiny rungs and holds)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact, ladder_outcome
from tts_bench.measure.samples import Outcome, read_samples, samples_path

from .conftest import CORPORA, HOLD_PER_LONE_REQUEST, LOCUSTFILE, REPO

pytestmark = pytest.mark.slow


def windows(artifact: QmaxArtifact) -> dict[int, tuple[float, float]]:
    """Each rung's measure window, from the ladder settings and the recorded start."""
    ladder = artifact.ladder
    return {n: ladder.measure_window(i) for i, n in enumerate(ladder.rungs)}


def test_every_rung_is_measured_from_raw_samples_in_its_window(http_ladder):
    artifact = load_artifact(http_ladder, QmaxArtifact)
    samples = read_samples(samples_path(http_ladder))
    assert [r.concurrency for r in artifact.rungs] == [1, 2]
    assert artifact.fingerprint.transport.value == "local-http"
    for rung, (w0, w1) in zip(artifact.rungs, windows(artifact).values(), strict=True):
        n = rung.concurrency
        assert abs(rung.client_mean_in_flight - n) <= 0.05 * n  # the client held N
        inside = [
            s for s in samples if s.rung == n and w0 <= s.end < w1 and s.outcome is Outcome.OK
        ]
        assert rung.ok == len(inside) > 0
        ttfab = [s.ttfab_ms for s in inside]
        latency = [s.latency_ms for s in inside]
        assert rung.ttfab_p50_ms == pytest.approx(np.percentile(ttfab, 50), rel=1e-12)
        assert rung.ttfab_p95_ms == pytest.approx(np.percentile(ttfab, 95), rel=1e-12)
        assert rung.ttfab_p99_ms == pytest.approx(np.percentile(ttfab, 99), rel=1e-12)
        assert rung.latency_p95_ms == pytest.approx(np.percentile(latency, 95), rel=1e-12)
        assert rung.latency_mean_ms == pytest.approx(np.mean(latency), rel=1e-12)
    assert (artifact.q_max, artifact.bracketed) == (2, False) == ladder_outcome(artifact.rungs)
    # --refine was asked, but nothing failed above Q_max: no probe was held.
    assert artifact.refinement is None and artifact.q_max_resolution is None
    assert {s.rung for s in samples} <= {1, 2, None}


def test_ttfab_times_the_first_chunk_not_the_end_of_the_stream(http_ladder):
    ok = [s for s in read_samples(samples_path(http_ladder)) if s.outcome is Outcome.OK]
    assert len(ok) >= 3
    ttfab = np.median([s.ttfab_ms for s in ok])
    latency = np.median([s.latency_ms for s in ok])
    assert ttfab < 0.7 * latency, f"TTFAB p50 {ttfab:.0f} ms vs latency p50 {latency:.0f} ms"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_distributed_ladder_stops_after_the_first_failing_rung(server, child_env, tmp_path):
    """One master and one worker process on loopback, the WebSocket transport, a 1 ms SLO.

    The hold scales with a lone request as the machine runs now, so the c=1 window holds a few
    finished requests however loaded (a clone's fixed 8 s window once finished none)."""
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ttotal.probe import speak

    lone = [speak(server.url, u) for u in load_corpus(CORPORA / "short.txt")[:2]]
    assert all(s.ok for s in lone), [s.detail for s in lone]
    hold_s = max(14.0, HOLD_PER_LONE_REQUEST * max(s.end - s.start for s in lone))
    port = free_port()
    common = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    master = subprocess.Popen(
        [
            *common, "--master", "--headless", "--expect-workers", "1",
            "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
            "--host", server.url, "--transport", "local-ws", "--rungs", "1,2",
            "--hold-s", f"{hold_s:.0f}", "--measure-s", f"{hold_s - 6:.0f}", "--idle-s", "1",
            "--slo-ms", "1",
            "--corpus", str(CORPORA / "short.txt"), "--out", str(tmp_path),
        ],
        cwd=REPO, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
        cwd=REPO, env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, _ = master.communicate(timeout=180)
        worker.wait(timeout=30)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert master.returncode == 0, out[-3000:]
    (path,) = tmp_path.glob("qmax-kokoro-82m-local-ws-*.json")
    artifact = load_artifact(path, QmaxArtifact)
    # c=1 misses a 1 ms SLO: the ladder stops there, and that failure brackets Q_max (none).
    assert [r.concurrency for r in artifact.rungs] == [1]
    assert artifact.rungs[0].usable, artifact.rungs[0].unusable_reason
    assert not artifact.rungs[0].meets_slo
    assert (artifact.q_max, artifact.bracketed) == (None, True)
    workers = {s.worker for s in read_samples(samples_path(path))}
    assert workers == {f"{socket.gethostname()}:{worker.pid}"}  # the worker's, not the master's
    assert master.pid != worker.pid and os.getpid() not in (master.pid, worker.pid)
    assert "rung 1/2 c=1" in out  # progress was shown
