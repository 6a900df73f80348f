"""No 500 from a request that passes validation (issue 40): the control plane's calls that the
chain makes, with parameters drawn from botocore's own input shapes (so they pass the guard
and botocore's validation), sent through boto3 to a local cloud's moto. Whatever AWS would do
with them, a 500 `InternalFailure` is not it.

moto runs alone here (a `MotoHost`, about a second), with one endpoint, so calls that name it
reach moto's deeper paths. `FUZZ_EXAMPLES=2000` runs it longer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.model import Shape
from botocore.validate import ParamValidator
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.local_cloud.conftest import one_instance_endpoint
from tts_bench.local_cloud.control_plane.moto_host import MotoHost

ENDPOINT = "fuzz-endpoint"
VARIANT = "AllTraffic"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))

# The chain's calls, service by service (what `tts_bench` and the local cloud itself send).
OPERATIONS: dict[str, tuple[str, ...]] = {
    "sagemaker": (
        "CreateModel", "CreateEndpointConfig", "CreateEndpoint", "DescribeEndpoint",
        "DescribeEndpointConfig", "UpdateEndpointWeightsAndCapacities", "ListEndpoints",
    ),
    "application-autoscaling": (
        "RegisterScalableTarget", "DeregisterScalableTarget", "DescribeScalableTargets",
        "PutScalingPolicy", "DeleteScalingPolicy", "DescribeScalingPolicies",
        "DescribeScalingActivities",
    ),
    "cloudwatch": (
        "PutMetricAlarm", "DescribeAlarms", "SetAlarmState", "DescribeAlarmHistory",
        "PutMetricData", "GetMetricData", "GetMetricStatistics", "PutDashboard",
    ),
    "logs": (
        "CreateLogGroup", "CreateLogStream", "PutLogEvents", "DescribeLogGroups",
        "DescribeLogStreams", "GetLogEvents", "FilterLogEvents",
    ),
}  # fmt: skip
# Names that exist, so that drawn calls reach past "not found".
KNOWN_STRINGS = (ENDPOINT, VARIANT, f"endpoint/{ENDPOINT}/variant/{VARIANT}", "sagemaker",
                 "sagemaker:variant:DesiredInstanceCount", "/g", "s", "AWS/SageMaker")  # fmt: skip


def _bounded(shape: Shape, low: int, high: int) -> tuple[int, int]:
    """The shape's own bounds (botocore checks the minimum), within [low, high]."""
    lowest = max(low, int(shape.metadata.get("min", low)))
    return lowest, max(lowest, min(high, int(shape.metadata.get("max", high))))


def values(shape: Shape, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of `shape` as botocore's validator accepts them (types, required members,
    enums, minimum lengths and values); patterns are left to the service, as AWS checks them."""
    kind = shape.type_name
    if kind == "structure":
        members = shape.members
        required = set(shape.required_members)
        optional = [n for n in members if n not in required] if depth < 3 else []
        return st.fixed_dictionaries(
            {n: values(members[n], depth + 1) for n in required},
            optional={n: values(members[n], depth + 1) for n in optional},
        )
    if kind == "list":
        low, high = _bounded(shape, 0, 3)
        return st.lists(values(shape.member, depth + 1), min_size=low, max_size=high)
    if kind == "map":
        low, high = _bounded(shape, 0, 2)
        return st.dictionaries(
            values(shape.key, depth + 1), values(shape.value, depth + 1),
            min_size=low, max_size=high,
        )  # fmt: skip
    if kind == "string":
        if shape.enum:
            return st.sampled_from(shape.enum)
        low, high = _bounded(shape, 0, 40)
        drawn = st.text(min_size=low, max_size=high)
        return st.sampled_from(KNOWN_STRINGS).filter(lambda s: low <= len(s) <= high) | drawn
    if kind in ("integer", "long"):
        low, high = _bounded(shape, -(2**31), 2**31 - 1)
        return st.integers(low, high)
    if kind in ("float", "double"):
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if kind == "boolean":
        return st.booleans()
    if kind == "timestamp":
        return st.integers(0, 4_000_000_000)
    if kind == "blob":
        return st.binary(max_size=16)
    raise AssertionError(f"no strategy for {kind}")


def clients(host: MotoHost) -> dict[str, Any]:
    return {
        service: boto3.client(
            service,
            endpoint_url=host.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"max_attempts": 1}),
        )
        for service in OPERATIONS
    }


@pytest.fixture(scope="module")
def moto() -> Iterator[dict[str, Any]]:
    host = MotoHost()
    host.start()
    host.instance_limit = 4
    made = clients(host)
    sagemaker = made["sagemaker"]
    one_instance_endpoint(sagemaker, ENDPOINT, VARIANT)
    made["logs"].create_log_group(logGroupName="/g")
    made["logs"].create_log_stream(logGroupName="/g", logStreamName="s")
    yield made
    host.stop()


CALLS = st.sampled_from([(s, op) for s, ops in OPERATIONS.items() for op in ops])


@settings(
    max_examples=EXAMPLES, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(data=st.data(), call=CALLS)
def test_fuzz_no_valid_call_is_a_500(moto: dict[str, Any], data: st.DataObject, call: Any) -> None:
    service, operation = call
    client = moto[service]
    model = client.meta.service_model.operation_model(operation)
    params = data.draw(values(model.input_shape), label=operation)
    assume(not ParamValidator().validate(params, model.input_shape).has_errors())
    try:
        client._make_api_call(operation, params)
    except ClientError as exc:
        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        assert status < 500, (operation, params, exc.response.get("Error"))


SCALABLE = {"ServiceNamespace": "ecs", "ScalableDimension": "ecs:service:DesiredCount"}
# What the fuzz found moto failing on (a 500), each now answered with the operation's own 4xx.
FOUND = {
    "scalable-targets-token": (
        "application-autoscaling", "DescribeScalableTargets",
        {"ServiceNamespace": "sagemaker", "NextToken": "AllTraffic"}, "InvalidNextTokenException",
    ),
    "scaling-policies-token": (
        "application-autoscaling", "DescribeScalingPolicies",
        {"ServiceNamespace": "sagemaker", "NextToken": "-1"}, "InvalidNextTokenException",
    ),
    "scaling-activities-token": (
        "application-autoscaling", "DescribeScalingActivities",
        {"ServiceNamespace": "sagemaker", "NextToken": "x"}, "InvalidNextTokenException",
    ),
    "alarm-history-token": (
        "cloudwatch", "DescribeAlarmHistory", {"NextToken": "fuzz-endpoint"}, "InvalidNextToken",
    ),
    "metric-without-namespace": (
        "cloudwatch", "GetMetricData",
        {"StartTime": 0, "EndTime": 600, "MetricDataQueries": [
            {"Id": "q", "MetricStat": {"Metric": {"MetricName": "m"}, "Period": 60,
                                       "Stat": "Maximum"}}]},
        "MissingParameter",
    ),
    "variant-without-model": (
        "sagemaker", "CreateEndpointConfig",
        {"EndpointConfigName": "no-model", "ProductionVariants": [
            {"VariantName": VARIANT, "InitialInstanceCount": 1, "InstanceType": "ml.g5.xlarge"}]},
        "ValidationException",
    ),
    "policy-without-target": (
        "application-autoscaling", "PutScalingPolicy",
        {**SCALABLE, "PolicyName": "p", "ResourceId": "service/x", "PolicyType":
         "TargetTrackingScaling", "TargetTrackingScalingPolicyConfiguration": {
             "TargetValue": 1.0, "PredefinedMetricSpecification": {
                 "PredefinedMetricType": "ECSServiceAverageCPUUtilization"}}},
        "ObjectNotFoundException",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("service", "operation", "params", "code"), FOUND.values(), ids=FOUND)
def test_what_the_fuzz_found_is_the_operations_own_4xx(
    moto: dict[str, Any], service: str, operation: str, params: dict[str, Any], code: str
) -> None:
    with pytest.raises(ClientError) as refused:
        moto[service]._make_api_call(operation, params)
    error = refused.value.response
    assert error["Error"]["Code"] == code and error["ResponseMetadata"]["HTTPStatusCode"] == 400
