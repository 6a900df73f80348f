"""Hostile calls at the control plane: malformed HTTP and API bodies at moto, and instance counts
(desired, initial, scalable-target bounds) that are negative, zero or huge.

moto runs alone here (a `MotoHost`, about a second to start), with an endpoint created through
it as the cloud's deploy does; no instance process is ever started, which is the point: every
count is refused before anything would start.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.local_cloud.conftest import one_instance_endpoint
from tts_bench.local_cloud.cloud import check_counts, check_settings
from tts_bench.local_cloud.control_plane.deploy import Deployment
from tts_bench.local_cloud.control_plane.moto_guard import Refusal, check_json_call, parse_json_body
from tts_bench.local_cloud.control_plane.moto_host import MotoHost
from tts_bench.local_cloud.errors import LocalCloudError
from tts_bench.local_cloud.settings import (
    MAX_CURVE_INSTANCES,
    MAX_LOCAL_INSTANCES,
    CurveInstances,
    LocalCloudSettings,
)

ENDPOINT = "hostile-endpoint"
VARIANT = "AllTraffic"
LIMIT = 5


class Listener:
    def __init__(self) -> None:
        self.requested: list[dict[str, int]] = []

    def endpoint_created(self, endpoint_name: str) -> None:
        pass

    def capacity_requested(self, endpoint_name: str, desired: dict[str, int]) -> None:
        self.requested.append(desired)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoHost]:
    host = MotoHost()
    host.start()
    host.instance_limit = LIMIT
    listener = Listener()
    host.listen(listener)
    host.listener = listener  # type: ignore[attr-defined]
    sagemaker = client(host, "sagemaker")
    one_instance_endpoint(sagemaker, ENDPOINT, VARIANT)
    yield host
    host.listen(None)
    host.stop()


def client(host: MotoHost, service: str, validate: bool = False) -> Any:
    """A boto3 client that sends what it is given: the server must refuse it, not botocore."""
    return boto3.client(
        service,
        endpoint_url=host.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(parameter_validation=validate, retries={"max_attempts": 1}),
    )


@pytest.fixture(autouse=True)
def no_error_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    with caplog.at_level(logging.WARNING):
        yield
    records = caplog.get_records("call")
    errors = [r for r in records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]


def set_desired(host: MotoHost, count: Any) -> None:
    client(host, "sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT,
        DesiredWeightsAndCapacities=[{"VariantName": VARIANT, "DesiredInstanceCount": count}],
    )


@pytest.mark.parametrize(
    ("count", "code"),
    [
        (-1, "ValidationException"),
        (0, "ValidationException"),
        (LIMIT + 1, "ResourceLimitExceeded"),
        (10**12, "ResourceLimitExceeded"),
        (2**63, "ResourceLimitExceeded"),
        ("3", "ValidationException"),
        (3.5, "ValidationException"),
    ],
)
def test_a_desired_count_past_the_limits_is_refused_and_nothing_is_asked_of_the_fleet(
    moto: MotoHost, count: Any, code: str
) -> None:
    before = list(moto.listener.requested)  # type: ignore[attr-defined]
    with pytest.raises(ClientError) as caught:
        set_desired(moto, count)
    assert caught.value.response["Error"]["Code"] == code
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert moto.listener.requested == before  # type: ignore[attr-defined]
    described = client(moto, "sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert described["ProductionVariants"][0].get("DesiredInstanceCount", 1) <= LIMIT


def test_a_desired_count_within_the_limit_reaches_the_fleet(moto: MotoHost) -> None:
    set_desired(moto, LIMIT)
    assert moto.listener.requested[-1] == {VARIANT: LIMIT}  # type: ignore[attr-defined]


def test_a_capacity_change_while_the_endpoint_is_updating_is_refused_as_sagemaker_does(
    moto: MotoHost,
) -> None:
    """[SM-update] A real boto3 client gets SageMaker's ValidationException for a capacity
    change while the endpoint is Updating, and the fleet is asked nothing; the variant set's
    `refuse_while_updating: false` reading accepts it."""
    endpoint = moto.endpoint(ENDPOINT)
    before = list(moto.listener.requested)  # type: ignore[attr-defined]
    endpoint.endpoint_status = "Updating"
    try:
        with pytest.raises(ClientError) as caught:
            set_desired(moto, 2)
        error = caught.value.response["Error"]
        assert error["Code"] == "ValidationException"
        assert error["Message"].startswith("Cannot update in-progress endpoint")
        assert ENDPOINT in error["Message"]
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert moto.listener.requested == before  # type: ignore[attr-defined]
        moto.refuse_while_updating = False
        set_desired(moto, 2)
        assert moto.listener.requested[-1] == {VARIANT: 2}  # type: ignore[attr-defined]
    finally:
        moto.refuse_while_updating = True
        endpoint.endpoint_status = "InService"


@pytest.mark.parametrize("count", [0, -4])
def test_an_endpoint_config_with_no_instances_is_refused(moto: MotoHost, count: int) -> None:
    with pytest.raises(ClientError) as caught:
        client(moto, "sagemaker").create_endpoint_config(
            EndpointConfigName=f"zero{count}",
            ProductionVariants=[
                {"VariantName": VARIANT, "ModelName": "m", "InitialInstanceCount": count,
                 "InstanceType": "ml.g5.xlarge"}
            ],
        )  # fmt: skip
    assert caught.value.response["Error"]["Code"] == "ValidationException"


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (-1, 5, "must not be negative"),
        (1, -1, "must not be negative"),
        (5, 2, "cannot be greater than maximum"),
        (1, MAX_LOCAL_INSTANCES + 1, "more instances than the local cloud runs"),
        (1, 10**15, "more instances than the local cloud runs"),
    ],
)
def test_scalable_target_bounds_that_cannot_be_are_refused(
    moto: MotoHost, low: int, high: int, expected: str
) -> None:
    with pytest.raises(ClientError) as caught:
        client(moto, "application-autoscaling").register_scalable_target(
            ServiceNamespace="sagemaker",
            ResourceId=f"endpoint/{ENDPOINT}/variant/{VARIANT}",
            ScalableDimension="sagemaker:variant:DesiredInstanceCount",
            MinCapacity=low,
            MaxCapacity=high,
        )
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert expected in caught.value.response["Error"]["Message"]


def test_a_max_past_the_quota_is_accepted_as_aws_accepts_it(moto: MotoHost) -> None:
    autoscaling = client(moto, "application-autoscaling")
    target = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"endpoint/{ENDPOINT}/variant/{VARIANT}",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }
    autoscaling.register_scalable_target(**target, MinCapacity=1, MaxCapacity=LIMIT + 3)
    with pytest.raises(ClientError):  # lowering max below the kept min: refused as a whole
        autoscaling.register_scalable_target(**target, MaxCapacity=0)


# -- malformed HTTP and bodies -----------------------------------------------------------


def raw_request(host: MotoHost, data: bytes) -> tuple[int, bytes]:
    hostname, port = host.url.removeprefix("http://").split(":")
    with socket.create_connection((hostname, int(port)), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer:
                head, body = answer.split(b"\r\n\r\n", 1)
                length = [
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(body) >= length[0]:
                    break
    if not answer.startswith(b"HTTP/"):  # a request line with no version gets an HTTP/0.9 page
        return int(answer.split(b"Error code: ", 1)[1][:3]), answer
    status = int(answer.split(b" ", 2)[1])
    return status, answer.split(b"\r\n\r\n", 1)[-1]


def json_call(service: str, target: str, body: bytes, framing: bytes | None = None) -> bytes:
    auth = (
        "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/"
        f"{service}/aws4_request, SignedHeaders=host, Signature=0"
    )
    head = (
        f"POST / HTTP/1.1\r\nHost: local\r\nAuthorization: {auth}\r\n"
        f"X-Amz-Target: {target}\r\nContent-Type: application/x-amz-json-1.1\r\n"
    ).encode()
    if framing is None:
        framing = b"Content-Length: %d\r\n" % len(body)
    return head + framing + b"\r\n" + body


DESCRIBE = ("sagemaker", "SageMaker.DescribeEndpoint")
MALFORMED_CALLS = {
    "list-body": json_call(*DESCRIBE, b"[1]"),
    "cut-json": json_call(*DESCRIBE, b'{"EndpointName":'),
    "not-utf8": json_call(*DESCRIBE, b'{"EndpointName": "\xff"}'),
    "nested": json_call(*DESCRIBE, b"[" * 100_000),
    "nan": json_call(*DESCRIBE, b'{"EndpointName": NaN}'),
    "wrong-type": json_call(*DESCRIBE, b'{"EndpointName": 5}'),
    "unknown-field": json_call(*DESCRIBE, b'{"EndpointName": "x", "Nope": 1}'),
    "unknown-op": json_call("sagemaker", "SageMaker.NoSuchOperation", b"{}"),
    "min-capacity-str": json_call(
        "application-autoscaling",
        "AnyScaleFrontendService.RegisterScalableTarget",
        b'{"ServiceNamespace": "sagemaker", "ResourceId": "endpoint/x/variant/v", '
        b'"ScalableDimension": "sagemaker:variant:DesiredInstanceCount", "MinCapacity": "a"}',
    ),
    "infinite-metric": json_call(
        "monitoring",
        "GraniteServiceVersion20100801.PutMetricData",
        b'{"Namespace": "x", "MetricData": [{"MetricName": "m", "Value": 1e999}]}',
    ),
    "bad-chunks": json_call(*DESCRIBE, b"ZZ\r\n{}\r\n0\r\n\r\n", b"Transfer-Encoding: chunked\r\n"),
    "request-line": b"GARBAGE\r\n\r\n",
    "huge": json_call(*DESCRIBE, b" " * (17 * 1024 * 1024)),
}


@pytest.mark.parametrize("data", MALFORMED_CALLS.values(), ids=MALFORMED_CALLS.keys())
def test_malformed_calls_are_a_4xx_with_no_traceback(moto: MotoHost, data: bytes) -> None:
    status, body = raw_request(moto, data)
    assert 400 <= status < 500, body[:300]


def test_after_the_malformed_calls_moto_still_answers(moto: MotoHost) -> None:
    described = client(moto, "sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert described["EndpointName"] == ENDPOINT


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
OPERATIONS = st.sampled_from(
    [
        "SageMaker.UpdateEndpointWeightsAndCapacities",
        "SageMaker.CreateEndpointConfig",
        "SageMaker.DescribeEndpoint",
        "AnyScaleFrontendService.RegisterScalableTarget",
        "AnyScaleFrontendService.PutScalingPolicy",
        "GraniteServiceVersion20100801.PutMetricAlarm",
        "Logs_20140328.PutLogEvents",
        "SageMaker.Nope",
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=OPERATIONS, body=JSON_VALUES | st.binary(max_size=200).map(lambda b: b))
def test_fuzz_the_guard_refuses_with_a_4xx_or_lets_a_well_formed_call_through(
    target: str, body: Any
) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        check_json_call(target, raw)
    except Refusal as refusal:
        assert 400 <= refusal.status < 500 and refusal.message
    else:
        assert isinstance(parse_json_body(raw), dict)


# -- counts before anything starts -----------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"instances": 0}, "--instances 0: give 1 to"),
        ({"instances": -3}, "--instances -3: give 1 to"),
        ({"instances": MAX_LOCAL_INSTANCES + 1}, f"give 1 to {MAX_LOCAL_INSTANCES}"),
        ({"instances": 10**12}, f"give 1 to {MAX_LOCAL_INSTANCES}"),
        ({"instance_quota": 0}, "instance_quota 0"),
        ({"provision_delay_s": -1.0}, "--provision-delay-s -1"),
        ({"provision_delay_s": 1e300}, "--provision-delay-s 1e+300"),
    ],
)
def test_settings_that_cannot_run_are_refused(changes: dict[str, Any], expected: str) -> None:
    with pytest.raises(LocalCloudError) as caught:
        check_settings(replace(LocalCloudSettings(), **changes))
    assert expected in str(caught.value)


def deployment(initial: int, max_capacity: int | None) -> Deployment:
    target = None if max_capacity is None else {"MinCapacity": 1, "MaxCapacity": max_capacity}
    return Deployment(
        endpoint_name="e", variant_name=VARIANT, instance_type="ml.g5.xlarge",
        initial_count=initial, routing_strategy="LEAST_OUTSTANDING_REQUESTS",
        startup_timeout_s=60.0, instance_env={}, model={}, endpoint_config={},
        endpoint_tags=[], scalable_target=target, policies=[], alarms=[],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("initial", "max_capacity", "expected"),
    [
        (LIMIT + 1, None, f"initial instance count {LIMIT + 1} is above the instance limit"),
        (1, MAX_LOCAL_INSTANCES + 1, "more instances than the local cloud runs"),
    ],
)
def test_a_deploy_past_the_limits_is_refused_before_any_instance(
    initial: int, max_capacity: int | None, expected: str
) -> None:
    with pytest.raises(LocalCloudError) as caught:
        check_counts(deployment(initial, max_capacity), LIMIT, MAX_LOCAL_INSTANCES)
    assert expected in str(caught.value)
    # A max past the quota is AWS's case: accepted.
    check_counts(deployment(LIMIT, LIMIT + 2), LIMIT, MAX_LOCAL_INSTANCES)


def test_curve_instances_may_number_more_than_processes() -> None:
    curve = replace(LocalCloudSettings(), curve=CurveInstances(qmax=Path("q.json")))
    check_settings(replace(curve, instances=MAX_LOCAL_INSTANCES + 1))
    with pytest.raises(LocalCloudError, match=f"give 1 to {MAX_CURVE_INSTANCES}"):
        check_settings(replace(curve, instances=MAX_CURVE_INSTANCES + 1))
