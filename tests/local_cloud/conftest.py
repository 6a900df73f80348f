"""A local cloud per test module (starting one costs a recording and an instance start-up).

`cloud_fixture(settings)` makes a module-scoped fixture; while it runs, the process env points
plain boto3 clients at it (AWS_ENDPOINT_URL and the per-service variables), as a user's shell
would after `tts-bench local-cloud`, with no AWS config of the machine's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tts_bench.local_cloud import LocalCloud, LocalCloudSettings, local_cloud

ONNX = ("--backend", "onnx")
READY_TIMEOUT_S = 300.0


def cloud_fixture(
    make_settings: Callable[[Path], LocalCloudSettings],
) -> Callable[..., Iterator[LocalCloud]]:
    """A module-scoped local cloud; `make_settings(folder)` may write files (plans) there."""

    @pytest.fixture(scope="module")
    def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
        state = tmp_path_factory.mktemp("local-cloud")
        settings = make_settings(state)
        lines: list[str] = []
        with pytest.MonkeyPatch.context() as patch:
            for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE"):
                patch.delenv(name, raising=False)
            patch.setenv("AWS_CONFIG_FILE", str(state / "no-aws-config"))
            patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(state / "no-aws-credentials"))
            patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
            patch.setenv("AWS_MAX_ATTEMPTS", "1")  # an error reaches the test as it was sent
            with local_cloud(settings, say=lines.append) as started:
                for key, value in started.env.items():
                    patch.setenv(key, value)
                started.said = lines  # type: ignore[attr-defined]
                yield started

    return cloud


def runtime_client() -> Any:
    """A plain boto3 client: only the environment points it at the local cloud."""
    return boto3.client("sagemaker-runtime", config=Config(max_pool_connections=64))


def control_client(service: str) -> Any:
    return boto3.client(service)


def read_log_events(cloud: LocalCloud, stream: str) -> list[str]:
    logs = control_client("logs")
    group = f"/aws/sagemaker/Endpoints/{cloud.endpoint_name}"
    events = logs.get_log_events(logGroupName=group, logStreamName=stream, startFromHead=True)
    return [e["message"] for e in events["events"]]


def emulated_plan_dir(folder: Path, server_args: tuple[str, ...]) -> Path:
    """A measurements folder with a plan measured through the local cloud on this working
    tree's image (the reference ladder's shape, Q_max 50, T_total 320.2 s: target 37.5 and
    scale-in 25, cooldowns 30 and 960 s), with the artifacts and raw data it was made from, so
    the program's gate re-derives it and deploys its scaling here, and only here."""
    from tests.measured_set import EMULATED_FINGERPRINT, measured_set
    from tts_bench.local_cloud.cloud import instance_base_env
    from tts_bench.local_cloud.instances.image_digest import local_image_digest
    from tts_bench.local_cloud.settings import REPO_ROOT

    digest = local_image_digest(server_args, instance_base_env(REPO_ROOT))
    fingerprint = EMULATED_FINGERPRINT.model_copy(update={"image_digest": digest})
    plans = folder / "measurements"
    measured_set(plans, fingerprint, "emulated")
    return plans


def one_instance_endpoint(sagemaker: Any, endpoint: str, variant: str) -> None:
    """A model, a one-instance config and an endpoint, as the cloud's deploy creates them."""
    sagemaker.create_model(
        ModelName="m", ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
        PrimaryContainer={"Image": "local/tts-server@sha256:00"},
    )  # fmt: skip
    sagemaker.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {"VariantName": variant, "ModelName": "m", "InitialInstanceCount": 1,
             "InstanceType": "ml.g5.xlarge"}
        ],
    )  # fmt: skip
    sagemaker.create_endpoint(EndpointName=endpoint, EndpointConfigName="c")
