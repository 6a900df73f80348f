"""Issue 39: a measured endpoint whose Model names a model package is fingerprinted by the
package's versioned ARN, beside its container's digest (moto stands in for SageMaker)."""

from __future__ import annotations

import pytest

from tests.aws.emulated import ROLE, EmulatedAws
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.aws.session import AwsSession
from tts_bench.errors import RefusalError
from tts_bench.measure.sagemaker_target import read_endpoint_target

DIGEST = "sha256:" + "c" * 64
PACKAGE_IMAGE = f"709825985650.dkr.ecr.us-east-1.amazonaws.com/sonic-3@{DIGEST}"


def _package_endpoint(aws: EmulatedAws, container: dict[str, str]) -> None:
    sm = aws.client("sagemaker")
    sm.create_model(
        ModelName="sonic-model",
        ExecutionRoleArn=ROLE,
        PrimaryContainer=container,
        EnableNetworkIsolation=True,
        Tags=[{"Key": "tts-bench:model", "Value": "sonic-3"}],
    )
    sm.create_endpoint_config(
        EndpointConfigName="sonic-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "sonic-model",
                "InstanceType": "ml.g6e.xlarge",
                "InitialInstanceCount": 1,
                "InitialVariantWeight": 1.0,
            }
        ],
    )
    sm.create_endpoint(EndpointName="sonic", EndpointConfigName="sonic-config")


def _package(aws: EmulatedAws) -> str:
    sm = aws.client("sagemaker")
    sm.create_model_package_group(ModelPackageGroupName="sonic-3-standin")
    created = sm.create_model_package(
        ModelPackageGroupName="sonic-3-standin",
        InferenceSpecification={
            "Containers": [{"Image": PACKAGE_IMAGE, "ImageDigest": DIGEST}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
    )
    return str(created["ModelPackageArn"])


def test_a_package_endpoint_is_fingerprinted_by_its_versioned_arn(aws: EmulatedAws) -> None:
    arn = _package(aws)
    _package_endpoint(aws, {"ModelPackageName": arn})
    target = read_endpoint_target(
        AwsSession.from_environment(), "sonic", "AllTraffic", Transport.RESPONSE_STREAM, "sonic-3"
    )
    fp = target.fingerprint
    assert (fp.model_package, fp.image_digest, fp.model) == (arn, DIGEST, "sonic-3")
    assert fp.deployed == arn and target.image == PACKAGE_IMAGE


def test_an_unversioned_package_is_refused_in_one_line(aws: EmulatedAws) -> None:
    arn = _package(aws)
    _package_endpoint(aws, {"ModelPackageName": arn.rsplit("/", 1)[0]})
    with pytest.raises(RefusalError, match="it must deploy a versioned package ARN") as caught:
        read_endpoint_target(
            AwsSession.from_environment(),
            "sonic",
            "AllTraffic",
            Transport.RESPONSE_STREAM,
            "sonic-3",
        )
    assert "\n" not in str(caught.value)
