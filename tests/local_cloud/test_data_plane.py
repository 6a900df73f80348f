"""The runtime through plain boto3: the response stream, and every error path (SPEC §11).

One local cloud for the module: one onnx instance with an admission bound of 2 (so a third
request is refused); the ceiling test lowers the invocation ceiling to 5 s for its request. The
contract checks (`contract`) are the ones curve instances pass too (`test_curve_contract`).
The fuzz sends the container's hostile request space (`tests/server/request_space`) through
both calls, FUZZ_EXAMPLES examples (default 10: a valid one costs a synthesis):

    FUZZ_EXAMPLES=500 python -m pytest tests/local_cloud/test_data_plane.py -q -k fuzz
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import logging
import os
import time
import urllib.request
from collections.abc import Callable

import pytest
from botocore.exceptions import ClientError, EventStreamError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tts_server.engine import create_engine

from tests.local_cloud import contract
from tests.local_cloud.conftest import ONNX, READY_TIMEOUT_S, cloud_fixture, runtime_client
from tests.local_cloud.streams import LONG_TEXT, comparable, events, rejoin, speech_request, stream
from tests.server.request_space import Body, hostile_bodies
from tts_bench.local_cloud import LocalCloud, LocalCloudSettings
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH

pytestmark = pytest.mark.slow

CEILING_S = 5.0
cloud = cloud_fixture(
    lambda _: LocalCloudSettings(
        server_args=ONNX, instances=1, instance_env={ENV_MAX_QUEUE_DEPTH: "2"}
    )
)


def _direct(url: str, body: dict) -> bytes:
    request = urllib.request.Request(
        f"{url}/invocations", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        return answer.read()


def _wait_idle(cloud: LocalCloud, timeout_s: float = 60.0) -> None:
    """Until no request is in flight (a closed client stream ends its container request)."""
    deadline = time.time() + timeout_s
    while any(i.in_flight for i in cloud.fleet.instances()):
        assert time.time() < deadline, "requests stayed in flight"
        time.sleep(0.2)


def test_streamed_request_rejoined_equals_the_container_direct(cloud: LocalCloud) -> None:
    body = speech_request("same", "Hello there. How are you today?")
    through, parts = contract.streams_chunks_then_done(cloud.endpoint_name, body)
    direct = _direct(cloud.fleet.in_service()[0].url, body)
    assert comparable(events(through)) == comparable(events(direct))
    assert events(through)[-1]["type"] == "done"
    # The frames are cut off the lines, as SageMaker's are: clients must re-join.
    assert any(not part.endswith(b"\n") for part in parts)


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
    """Two long requests fill the bound of 2 (admitted on arrival); the third is refused."""
    url = cloud.fleet.in_service()[0].url
    contract.ping_reports_the_bound_and_the_fingerprint(url, 2)
    contract.saturated_instance_gives_its_503_with_retry_after(
        cloud.endpoint_name, url, speech_request("hold", LONG_TEXT)
    )
    _wait_idle(cloud)


def test_a_client_that_leaves_mid_stream_ends_quietly(
    cloud: LocalCloud, caplog: pytest.LogCaptureFixture
) -> None:
    """A user who stops reading and closes the stream (Locust stopping a user does this) frees
    the container's slot, and the runtime logs no error for it."""
    answer = stream(runtime_client(), cloud.endpoint_name, speech_request("leave", LONG_TEXT))
    with caplog.at_level(logging.WARNING):
        assert "PayloadPart" in next(iter(answer["Body"]))
        answer["Body"].close()
        _wait_idle(cloud)
        time.sleep(0.5)  # the runtime's next write finds the socket closed
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def _direct_leave(url: str, context_id: str) -> float:
    """Straight to the container: a long stream, its first line read, the connection closed;
    the time of the close."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    body = json.dumps(speech_request(context_id, LONG_TEXT))
    connection.request("POST", "/invocations", body, {"Content-Type": "application/json"})
    assert connection.getresponse().readline()
    connection.close()
    return time.perf_counter()


def _direct_ttfab_s(url: str, context_id: str) -> float:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    body = json.dumps(speech_request(context_id, "Sure."))
    started = time.perf_counter()
    connection.request("POST", "/invocations", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    assert answer.status == 200 and answer.readline()
    ttfab = time.perf_counter() - started
    answer.read()
    connection.close()
    return ttfab


def _cloud_leave(cloud: LocalCloud, context_id: str) -> float:
    answer = stream(runtime_client(), cloud.endpoint_name, speech_request(context_id, LONG_TEXT))
    assert "PayloadPart" in next(iter(answer["Body"]))
    answer["Body"].close()
    return time.perf_counter()


def _cloud_ttfab_s(cloud: LocalCloud, context_id: str) -> float:
    client = runtime_client()
    started = time.perf_counter()
    answer = stream(client, cloud.endpoint_name, speech_request(context_id, "Sure."))
    assert "PayloadPart" in next(iter(answer["Body"]))
    ttfab = time.perf_counter() - started
    rejoin(answer)
    return ttfab


def _freed_s(url: str, left_at: float) -> float:
    """Seconds from the client's leaving until the container holds no request."""
    deadline = left_at + 60
    while contract.ping(url)["in_flight"]:
        assert time.perf_counter() < deadline, "the container kept the request"
        time.sleep(0.01)
    return time.perf_counter() - left_at


# Half the defect these tests guard against: before the runtime cancelled its handler when the
# client's connection closed, the container kept a left request until its next line, 2-4 s later
# with LONG_TEXT on a quiet machine (longer on a busy one). A margin this size in seconds, not a
# ratio, because a busy machine adds to both ways alike: CI once read the best of three rounds at
# 1.11 s direct and 1.79 s through the cloud with nothing held.
HELD_MARGIN_S = 1.0


def test_after_a_client_leaves_mid_stream_the_next_starts_as_quickly_as_direct(
    cloud: LocalCloud,
) -> None:
    """A client leaves a long stream after its first line. Through the local cloud the
    container lets that request go as soon as when the client goes straight to it (the runtime
    closes the container's request the moment its client leaves, not at its next line), and
    a request sent right after the leaving one gets its first byte as soon. Rounds alternate
    and the best of three each way is compared: a busy moment of this machine slows one round,
    a container held after its client left slows every round by a line's time."""
    url = cloud.fleet.in_service()[0].url
    _cloud_ttfab_s(cloud, "warm")
    ways: dict[str, tuple[Callable[[str], float], Callable[[str], float]]] = {
        "direct": (lambda c: _direct_leave(url, c), lambda c: _direct_ttfab_s(url, c)),
        "cloud": (lambda c: _cloud_leave(cloud, c), lambda c: _cloud_ttfab_s(cloud, c)),
    }
    freed_s: dict[str, list[float]] = {"direct": [], "cloud": []}
    ttfab_s: dict[str, list[float]] = {"direct": [], "cloud": []}
    for round_ in range(3):
        for way, (leave, next_ttfab_s) in ways.items():
            freed_s[way].append(_freed_s(url, leave(f"{way}-freed-{round_}")))
            leave(f"{way}-leave-{round_}")
            ttfab_s[way].append(next_ttfab_s(f"{way}-next-{round_}"))
            _wait_idle(cloud)
    assert min(freed_s["cloud"]) <= min(freed_s["direct"]) + HELD_MARGIN_S, freed_s
    assert min(ttfab_s["cloud"]) <= min(ttfab_s["direct"]) + HELD_MARGIN_S, ttfab_s


def test_past_the_ceiling_is_model_invocation_time_exceeded(cloud: LocalCloud) -> None:
    """Mid-stream it is a ModelStreamError event; before the first byte (a slow machine) the
    same error as the call's answer, with its ErrorCode."""
    cloud.ceiling_s = CEILING_S
    started = time.monotonic()
    try:
        with pytest.raises((EventStreamError, ClientError)) as caught:
            rejoin(stream(runtime_client(), cloud.endpoint_name, speech_request("late", LONG_TEXT)))
    finally:
        cloud.ceiling_s = cloud.settings.invocation_ceiling_s
    error = caught.value.response
    assert error["Error"]["Code"] == "ModelStreamError"
    assert error["Error"]["Message"].startswith("ModelInvocationTimeExceeded")
    if not isinstance(caught.value, EventStreamError):
        assert error["ErrorCode"] == "ModelInvocationTimeExceeded"
    assert CEILING_S <= time.monotonic() - started < CEILING_S + 5
    _wait_idle(cloud)


def test_killed_instance_mid_stream_then_no_instance_in_service(cloud: LocalCloud) -> None:
    client = runtime_client()
    answer = stream(client, cloud.endpoint_name, speech_request("cut", LONG_TEXT))
    parts = iter(answer["Body"])
    assert "PayloadPart" in next(parts)
    (instance,) = cloud.fleet.in_service()
    cloud.fleet.kill(instance.instance_id)
    with pytest.raises(EventStreamError) as caught:
        for _ in parts:
            pass
    assert caught.value.response["Error"]["Code"] == "ModelStreamError"
    assert caught.value.response["Error"]["Message"].startswith("StreamBroken")

    # Until its replacement is InService there is nowhere to send a request.
    deadline = time.time() + 10
    while cloud.fleet.in_service():  # the fleet sees the process gone
        assert time.time() < deadline, "the killed instance still counts as InService"
        time.sleep(0.05)
    with pytest.raises(ClientError) as refused:
        stream(client, cloud.endpoint_name, speech_request("nowhere"))
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert "no InService instance" in refused.value.response["Error"]["Message"]
    cloud.wait_in_service(READY_TIMEOUT_S)
    assert cloud.fleet.in_service()[0].instance_id != instance.instance_id


def test_unknown_endpoint_is_a_validation_error(cloud: LocalCloud) -> None:
    with pytest.raises(ClientError) as caught:
        stream(runtime_client(), "no-such-endpoint", speech_request("x"))
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert "no-such-endpoint" in caught.value.response["Error"]["Message"]


def test_service_quotas_answer_for_the_instance_type(cloud: LocalCloud) -> None:
    import boto3

    quotas = boto3.client("service-quotas")
    listed = quotas.list_service_quotas(ServiceCode="sagemaker")["Quotas"]
    (quota,) = [q for q in listed if q["QuotaName"] == "ml.g5.xlarge for endpoint usage"]
    again = quotas.get_service_quota(ServiceCode="sagemaker", QuotaCode=quota["QuotaCode"])
    assert again["Quota"]["Value"] == quota["Value"] == 20.0  # the dev stack's maxInstances


def test_concurrent_streams_all_complete(cloud: LocalCloud) -> None:
    client = runtime_client()

    def one(i: int) -> str:
        data, _ = rejoin(stream(client, cloud.endpoint_name, speech_request(f"c{i}", "Sure.")))
        return events(data)[-1]["type"]

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        assert list(pool.map(one, range(4))) == ["done"] * 4


FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10"))
VOICES = sorted(create_engine().voices)  # names only: no weights load


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large],
    database=None,
)  # fmt: skip
@given(body=hostile_bodies(VOICES), streaming=st.booleans())
def test_fuzz_the_data_plane_answers_a_client_mistake_with_a_4xx_and_holds_nothing(
    cloud: LocalCloud, caplog: pytest.LogCaptureFixture, body: Body, streaming: bool
) -> None:
    """Through boto3, both calls: a valid request is served to its `done`; any other is a 424
    ModelError carrying the container's 4xx (or a 413 past 6 MB), never a 5xx, never a broken
    stream; afterwards nothing is in flight and nothing was logged at error level."""
    client = runtime_client()
    with caplog.at_level(logging.WARNING):
        try:
            if streaming:
                data, _ = rejoin(
                    client.invoke_endpoint_with_response_stream(
                        EndpointName=cloud.endpoint_name, Body=body.encode(),
                        ContentType="application/json",
                    )
                )  # fmt: skip
            else:
                data = client.invoke_endpoint(
                    EndpointName=cloud.endpoint_name, Body=body.encode(),
                    ContentType="application/json",
                )["Body"].read()  # fmt: skip
        except ClientError as exc:
            response = exc.response
            assert not isinstance(exc, EventStreamError), response
            assert response["ResponseMetadata"]["HTTPStatusCode"] in (413, 424), response
            assert not body.must_serve, response
            if response["ResponseMetadata"]["HTTPStatusCode"] == 424:
                assert 400 <= response["OriginalStatusCode"] < 500, response
        else:
            last = events(data)[-1]
            assert last["done"] is True and last["status_code"] < 500, last
            if body.must_serve:
                assert last["type"] == "done", last
        _wait_idle(cloud)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]
