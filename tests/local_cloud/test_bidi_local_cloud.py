"""bidi-stream against the local cloud: the AWS SDK's HTTP/2 client, and a Locust rung over it.

One local cloud for the module (one onnx instance, deployed without a plan: no bound, so the
ladder may measure it), with the HTTP/2 bridge on its `open_session`; clients reach it only
through environment variables, as a user's would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.local_cloud import LocalCloud, LocalCloudSettings, local_cloud
from tts_bench.local_cloud.data_plane.bidi_bridge import BidiBridge
from tts_bench.local_cloud.data_plane.tls import make_local_tls
from tts_bench.measure.samples import Outcome, read_samples, samples_path
from tts_bench.measure.transport.bidi_stream import BidiWorker

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "loadtest" / "qmax.py"
SHORT_CORPUS = REPO / "tests" / "ladder" / "corpora" / "short.txt"
TURN_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    no_plans = tmp_path_factory.mktemp("no-plans")
    settings = LocalCloudSettings(
        instances=1,
        server_args=("--backend", "onnx"),
        stack_overrides={"measurementsDir": str(no_plans)},
    )
    with local_cloud(settings) as started:
        yield started


@pytest.fixture(scope="module")
def client_env(cloud: LocalCloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """What a user exports: the cloud's variables, the bridge's URL and the CA bundle.

    Until the cloud starts the bridge itself (its env then carries the HTTP/2 URL), the test
    starts one on the cloud's `open_session`, the same hook the cloud would give it.
    """
    inherited = {
        k: v for k, v in os.environ.items() if k not in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE")
    }
    paths = [str(REPO), str(REPO / "container"), os.environ.get("PYTHONPATH", "")]
    env = {**inherited, **cloud.env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    if "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2" in cloud.env:
        yield env
        return
    tls = make_local_tls(tmp_path_factory.mktemp("tls"))
    with BidiBridge(tls, cloud.open_session) as bridge:
        yield {**env, **bridge.client_env()}


def request_body(context_id: str, text: str) -> dict:
    return {
        "context_id": context_id,
        "transcript": text,
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }


def test_two_turns_on_one_session_through_the_local_cloud(
    cloud: LocalCloud, client_env: dict
) -> None:
    with BidiWorker(client_env) as worker:
        session = worker.open(cloud.endpoint_name)
        session.wait_opened(TURN_TIMEOUT_S)
        results = [
            session.turn(request_body(f"turn-{n}", text), TURN_TIMEOUT_S)
            for n, text in enumerate(("Hello there.", "Thank you."), start=1)
        ]
        assert session.close()["error"] is None
    assert [r.outcome for r in results] == ["ok", "ok"], [r.detail for r in results]
    assert all(r.ttfab_ms is not None and r.audio_bytes > 0 for r in results)


def fleet_in_flight(cloud: LocalCloud) -> int:
    assert cloud.fleet is not None
    return sum(i.in_flight for i in cloud.fleet.instances())


def test_an_idle_session_counts_nothing_in_flight(cloud: LocalCloud, client_env: dict) -> None:
    """Through the AWS SDK's HTTP/2 client: an open, idle session leaves the fleet's in-flight
    count (what ConcurrentRequestsPerModel averages) at 0, and a whole 10 s metric window
    spent idle publishes 0; a request on the session counts 1 while it is served and 0 again
    once done, the session still open. Costs one metric window (10 to 20 s)."""
    assert cloud.fleet is not None
    seen: list[int] = []
    recording = [True]
    cloud.fleet.observe_concurrency(lambda total, _: seen.append(total) if recording[0] else None)
    assert fleet_in_flight(cloud) == 0
    try:
        with BidiWorker(client_env) as worker:
            session = worker.open(cloud.endpoint_name)
            session.wait_opened(TURN_TIMEOUT_S)
            opened_s = cloud.clock.now()
            assert fleet_in_flight(cloud) == 0
            give_up = time.monotonic() + 120  # a guard against a stalled publisher, not a bound
            while not [w for w in cloud.metrics.windows() if w.start_s >= opened_s]:
                assert time.monotonic() < give_up, "no metric window closed"
                time.sleep(0.2)  # until a window that began after the session opened closes
            (idle, *_) = [w for w in cloud.metrics.windows() if w.start_s >= opened_s]
            assert idle.concurrency_max == 0.0
            assert fleet_in_flight(cloud) == 0 and seen.count(1) == 0
            result = session.turn(request_body("idle-1", "Hello there."), TURN_TIMEOUT_S)
            assert result.outcome == "ok", result.detail
            assert seen.count(1) >= 1 and seen[-1] == 0  # counted while served, then released
            assert fleet_in_flight(cloud) == 0
            assert session.close()["error"] is None
    finally:
        recording[0] = False
    assert max(seen) == 1


def test_bidi_stream_runs_one_short_rung_through_locust(
    cloud: LocalCloud, client_env: dict, tmp_path: Path
) -> None:
    # A 25 s window: at load 7 one bidi turn took over 15 s and a 15 s window finished none.
    run = subprocess.run(
        [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
            "--transport", "bidi-stream", "--endpoint", cloud.endpoint_name,
            "--rungs", "1", "--hold-s", "30", "--measure-s", "25", "--idle-s", "0",
            "--slo-ms", "60000", "--corpus", str(SHORT_CORPUS), "--out", str(tmp_path),
        ],
        cwd=REPO, env=client_env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (path,) = tmp_path.glob("qmax-kokoro-82m-bidi-stream-*.json")
    artifact = load_artifact(path, QmaxArtifact)
    assert artifact.fingerprint.transport == "bidi-stream"
    assert artifact.provenance.kind == "emulated"
    (rung,) = artifact.rungs
    assert rung.concurrency == 1 and rung.usable
    samples = read_samples(samples_path(path))
    finished = [s for s in samples if s.outcome is Outcome.OK]
    assert len(finished) >= 2  # several turns on the user's one session
    assert all(s.ttfab_ms is not None and 0 < s.ttfab_ms <= s.latency_ms for s in finished)
    assert not [s for s in samples if s.outcome is Outcome.ERROR]
