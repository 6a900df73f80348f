"""Curve instances pass the container's HTTP contract with the same client code as real ones.

One local cloud for the module: one curve instance from the reference ladder, admission bound 2,
deterministic service at rate scale 24 (a request holds its slot about 1.5 s, so a bound can be
filled on purpose), start-up along the reference ttotal compressed 100-fold. No plan: no scaling.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import REFERENCE_QMAX, REFERENCE_TTOTAL
from tests.local_cloud import contract
from tests.local_cloud.conftest import cloud_fixture, runtime_client
from tests.local_cloud.streams import speech_request, stream
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.aws.session import AwsSession
from tts_bench.errors import RefusalError
from tts_bench.local_cloud import LocalCloud, LocalCloudError, LocalCloudSettings
from tts_bench.local_cloud.settings import CurveInstances
from tts_bench.measure.sagemaker_target import read_endpoint_target
from tts_bench.serving.server_ping import fetch_ping
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH

pytestmark = pytest.mark.slow

RATE_SCALE = 24.0
cloud = cloud_fixture(
    lambda _: LocalCloudSettings(
        curve=CurveInstances(
            qmax=REFERENCE_QMAX,
            ttotal=REFERENCE_TTOTAL,
            rate_scale=RATE_SCALE,
            service="deterministic",
            seed=1,
        ),
        time_scale=100.0,
        instances=1,
        instance_env={ENV_MAX_QUEUE_DEPTH: "2"},
    )
)


def _url(cloud: LocalCloud) -> str:
    return cloud.fleet.in_service()[0].url


def test_streamed_request_gives_chunks_then_done(cloud: LocalCloud) -> None:
    contract.streams_chunks_then_done(cloud.endpoint_name, speech_request("curve-stream"))


def test_invoke_endpoint_returns_the_whole_body(cloud: LocalCloud) -> None:
    contract.invoke_endpoint_returns_the_whole_body(cloud.endpoint_name, cloud.variant_name)


@pytest.mark.parametrize("call", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_malformed_request_is_a_model_error_with_the_original_422(
    cloud: LocalCloud, call: str
) -> None:
    contract.malformed_request_is_a_model_error_with_the_original_422(
        cloud.endpoint_name, call, cloud.fleet.in_service()[0].log_stream
    )


def test_saturated_instance_gives_its_503_with_retry_after(cloud: LocalCloud) -> None:
    contract.ping_reports_the_bound_and_the_fingerprint(_url(cloud), 2)
    contract.saturated_instance_gives_its_503_with_retry_after(
        cloud.endpoint_name, _url(cloud), speech_request("hold")
    )


def test_ttfab_is_the_wait_plus_the_c1_first_chunk(cloud: LocalCloud) -> None:
    """Two requests at once: the first's first byte after the c=1 rung's median TTFAB (x 24),
    the second's after the first's whole service (1 / X(1), x 24) plus the same."""
    import threading

    first_chunk_s = 0.06002 * RATE_SCALE
    service_s = RATE_SCALE / 16.083
    ttfab: dict[str, float] = {}

    # The clients are made before the clock starts: building one takes tenths of a second on a
    # busy machine, which is no part of the time to first byte.
    clients = {name: runtime_client() for name in ("first", "second")}

    def one(name: str) -> None:
        began = time.monotonic()
        answer = stream(clients[name], cloud.endpoint_name, speech_request(name))
        for event in answer["Body"]:
            if "PayloadPart" in event and name not in ttfab:
                ttfab[name] = time.monotonic() - began
        answer["Body"].close()

    threads = [threading.Thread(target=one, args=(n,)) for n in ("first", "second")]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # arrival order
    for thread in threads:
        thread.join(timeout=30)
    assert ttfab["first"] == pytest.approx(first_chunk_s, abs=0.25)
    assert ttfab["second"] == pytest.approx(service_s + first_chunk_s, abs=0.3)


def test_ping_carries_the_ladders_fingerprint_and_qmax_refuses_it(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str]
) -> None:
    fingerprint = load_artifact(REFERENCE_QMAX, QmaxArtifact).fingerprint
    assert fingerprint is not None
    body = contract.ping(_url(cloud))
    assert body["fingerprint"] == fingerprint.model_dump(mode="json", exclude={"transport"})
    assert (body["instance_model"], body["rate_scale"]) == ("curve", RATE_SCALE)
    with pytest.raises(RefusalError, match="only ever measured on the real engine"):
        fetch_ping(_url(cloud)).refuse_curve_modelled()
    target = read_endpoint_target(
        AwsSession.from_environment(),
        cloud.endpoint_name,
        cloud.variant_name,
        Transport.RESPONSE_STREAM,
        fingerprint.model,
    )
    assert target.curve_modelled and target.provenance_kind == "emulated"
    assert target.fingerprint.model_dump(exclude={"transport"}) == fingerprint.model_dump(
        exclude={"transport"}
    )
    with pytest.raises(RefusalError, match="runs curve instances"):
        target.refuse_curve_modelled()

    from tts_bench.cli import main

    assert main(["qmax", "--host", _url(cloud), "--transport", "local-http"]) == 2
    err = capsys.readouterr().err.strip()
    assert "curve instance" in err and len(err.splitlines()) == 1


def test_the_bidirectional_stream_is_refused_in_one_line(cloud: LocalCloud) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{_url(cloud)}/invocations-bidirectional-stream", timeout=10)
    assert caught.value.code == 501
    message = json.loads(caught.value.read())["message"]
    assert "out of scope" in message and "\n" not in message
    with (
        pytest.raises(LocalCloudError, match="curve instances") as refused,
        cloud.open_session(cloud.endpoint_name),
    ):
        pass
    assert "\n" not in str(refused.value)


def test_rehearse_refuses_an_endpoint_without_a_deployed_plan_before_sending(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    from tests.conftest import REFERENCE_PLAN
    from tts_bench.cli import main

    began = cloud.clock.now()
    code = main(
        [
            "rehearse",
            "--plan",
            str(REFERENCE_PLAN),
            "--endpoint",
            cloud.endpoint_name,
            "--synthetic",
            "steady:5",
            "--duration-s",
            "60",
            "--out",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert f"endpoint {cloud.endpoint_name} has no deployed plan (no scalable target" in err
    time.sleep(0.5)  # five of the cloud's 10 s windows at its 100-fold clock
    assert sum(w.invocations for w in cloud.metrics.windows() if w.start_s >= began - 10) == 0
    assert not list(tmp_path.iterdir())
