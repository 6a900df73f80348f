"""A third contract measures a third container with no code change (issue 39's acceptance):
`tests/ladder/contracts/acme.yaml`, written from docs/other-endpoints.md alone, read by a live
ladder through `local-cloud --container-cmd` hosting `tests/ladder/acme_standin.py`, whose wire
no code in tts_bench knows and whose `/ping` is SageMaker's bare health check."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.servers import as_a_client_of_the_cloud
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.local_cloud import LocalCloudSettings, local_cloud
from tts_bench.measure.samples import Outcome, read_samples, samples_path
from tts_bench.measure.transport.contract import load_contract

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "tests" / "ladder" / "contracts" / "acme.yaml"
STANDIN = REPO / "tests" / "ladder" / "acme_standin.py"
CORPUS = REPO / "tests" / "ladder" / "corpora" / "short.txt"

pytestmark = pytest.mark.slow


def test_a_contract_file_alone_brackets_a_third_containers_two_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tts_bench.aws.session import AwsSession
    from tts_bench.measure.ladder.live.live_ladder import LiveLadderRequest, run_live_ladder
    from tts_bench.measure.ladder.schedule import LadderSchedule

    settings = LocalCloudSettings(
        instances=1,
        container_cmd=shlex.join([sys.executable, str(STANDIN), "--rtf", "0.2"]),
        stack_overrides={
            "model": "acme-tts", "endpointName": "acme-standin",
            "instanceType": "ml.g6.xlarge", "measurementsDir": str(tmp_path / "no-plans"),
            "contract": "acme",
        },
        cloudwatch_delay_s=0.0,
    )  # fmt: skip
    with local_cloud(settings) as cloud:
        as_a_client_of_the_cloud(monkeypatch, cloud.env, tmp_path / "state")
        # 3 s windows through the cloud decide no rung on its p95 interval: the point Q_max.
        request = LiveLadderRequest(
            endpoint=cloud.endpoint_name, variant=cloud.variant_name,
            transport=Transport.RESPONSE_STREAM,
            schedule=LadderSchedule(rungs=(2, 3), hold_s=4, measure_s=3, idle_s=0),
            slo_ms=5000, model="acme-tts", out=tmp_path, corpus=CORPUS, metric_wait_s=0,
            plan_surge_ratio=None, contract=str(CONTRACT), q_max_basis="point",
        )  # fmt: skip
        path = run_live_ladder(AwsSession.from_environment(None), request, print, print)
    artifact = load_artifact(path, QmaxArtifact)
    assert (artifact.q_max, artifact.bracketed) == (2, True)
    assert artifact.fingerprint is not None
    assert artifact.fingerprint.contract == load_contract(str(CONTRACT)).ref
    two, three = artifact.rungs
    assert two.rejected == two.errors == 0 and two.ok > 0
    assert three.rejected > 0 and three.errors == 0 and not three.meets_slo
    samples = read_samples(samples_path(path))
    refused = [s for s in samples if s.outcome is Outcome.REJECTED]
    assert refused and all("503" in s.detail and "overloaded" in s.detail for s in refused)
    assert not [s for s in samples if s.outcome is Outcome.ERROR]
    # TTFAB is the first `audio` event, which the stand-in sends 4 ms (20 ms at RTF 0.2) after
    # its `metadata` event; its audio is read from `audio_b64` at the contract's width.
    ok = [s for s in samples if s.outcome is Outcome.OK]
    assert ok and min(s.ttfab_ms or 0 for s in ok) >= 4.0, sorted(s.ttfab_ms for s in ok)[:5]
    chunks = [(s.audio_ms or 0) / 20 for s in ok]
    assert all(n >= 1 and n == pytest.approx(round(n)) for n in chunks), chunks[:5]
