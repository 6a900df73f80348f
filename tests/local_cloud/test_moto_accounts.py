"""One cloud, one moto (issue 40): moto's backends are process globals, so each `MotoHost` serves
an account of its own. Two in one process, or one after another, never see each other's
resources, and each one's hooks (its listener, its limits, its clock) act for its own calls only.

Cost: three moto servers in this process (about a second each), no instance.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.control_plane.moto_host import MotoHost
from tts_bench.local_cloud.settings import ACCOUNT

VARIANT = "AllTraffic"


class Listener:
    def __init__(self) -> None:
        self.created: list[str] = []
        self.requested: list[dict[str, int]] = []

    def endpoint_created(self, endpoint_name: str) -> None:
        self.created.append(endpoint_name)

    def capacity_requested(self, endpoint_name: str, desired: dict[str, int]) -> None:
        self.requested.append(desired)


def client(host: MotoHost, service: str) -> Any:
    return boto3.client(
        service, endpoint_url=host.url, region_name="us-east-1", aws_access_key_id="testing",
        aws_secret_access_key="testing", config=Config(retries={"max_attempts": 1}),
    )  # fmt: skip


def create_endpoint(host: MotoHost, name: str) -> None:
    sagemaker = client(host, "sagemaker")
    sagemaker.create_model(
        ModelName=f"{name}-model", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "local/tts-server@sha256:00"},
    )  # fmt: skip
    sagemaker.create_endpoint_config(
        EndpointConfigName=f"{name}-config",
        ProductionVariants=[
            {"VariantName": VARIANT, "ModelName": f"{name}-model", "InitialInstanceCount": 1,
             "InstanceType": "ml.g5.xlarge"}
        ],
    )  # fmt: skip
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")


def endpoints(host: MotoHost) -> list[str]:
    listed = client(host, "sagemaker").list_endpoints()["Endpoints"]
    return sorted(e["EndpointName"] for e in listed)


def log_groups(host: MotoHost) -> list[str]:
    return [g["logGroupName"] for g in client(host, "logs").describe_log_groups()["logGroups"]]


def started(clock: ServiceClock | None = None, limit: int = 4) -> tuple[MotoHost, Listener]:
    host = MotoHost(clock)
    host.start()
    host.instance_limit = limit
    listener = Listener()
    host.listen(listener)
    return host, listener


def set_desired(host: MotoHost, endpoint: str, count: int) -> None:
    client(host, "sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=endpoint,
        DesiredWeightsAndCapacities=[{"VariantName": VARIANT, "DesiredInstanceCount": count}],
    )


def test_two_clouds_in_one_process_see_only_their_own_resources() -> None:
    a, heard_a = started(limit=4)
    b: MotoHost | None = None
    try:
        create_endpoint(a, "ep-a")
        client(a, "logs").create_log_group(logGroupName="/a")
        b, heard_b = started(limit=2)  # a start no longer empties every cloud of the process
        assert a.account != b.account and a.account == ACCOUNT
        assert endpoints(a) == ["ep-a"] and log_groups(a) == ["/a"]
        assert endpoints(b) == [] and log_groups(b) == []
        create_endpoint(b, "ep-b")
        client(b, "logs").create_log_group(logGroupName="/b")
        assert endpoints(a) == ["ep-a"] and endpoints(b) == ["ep-b"]
        assert log_groups(a) == ["/a"] and log_groups(b) == ["/b"]
        # Each one's hooks act for its own calls: its listener, its instance limit.
        assert heard_a.created == ["ep-a"] and heard_b.created == ["ep-b"]
        set_desired(a, "ep-a", 3)
        with pytest.raises(ClientError, match="ResourceLimitExceeded"):
            set_desired(b, "ep-b", 3)  # above b's limit of 2, within a's
        assert heard_a.requested == [{VARIANT: 3}] and heard_b.requested == []
        assert a.endpoint("ep-a").endpoint_name == "ep-a"
        b.stop()
        b = None
        # The other's stop leaves this one's resources and hooks in place.
        assert endpoints(a) == ["ep-a"] and log_groups(a) == ["/a"]
        with pytest.raises(ClientError, match="ResourceLimitExceeded"):
            set_desired(a, "ep-a", 5)
    finally:
        a.stop()
        if b is not None:
            b.stop()
    after, _ = started()  # one after another: the account is reused, empty
    try:
        assert after.account == ACCOUNT
        assert endpoints(after) == [] and log_groups(after) == []
    finally:
        after.stop()


def test_each_cloud_stamps_its_logs_with_its_own_clock() -> None:
    """A compressed cloud beside a real-time one: each log stream's creationTime is read on the
    clock of the cloud that created it, between that clock's readings before and after."""
    fast_clock = ServiceClock.starting_now(1000.0)
    real, _ = started()
    fast, _ = started(fast_clock)
    try:
        for host, now in ((real, lambda: datetime.now(UTC)), (fast, fast_clock.now_datetime)):
            logs = client(host, "logs")
            logs.create_log_group(logGroupName="/g")
            before = now()
            logs.create_log_stream(logGroupName="/g", logStreamName="s")
            after = now()
            (stream,) = logs.describe_log_streams(logGroupName="/g")["logStreams"]
            created = datetime.fromtimestamp(stream["creationTime"] / 1000, UTC)
            slack = timedelta(milliseconds=1)  # creationTime is whole milliseconds
            assert before - slack <= created <= after + slack, (host.account, before, after)
    finally:
        fast.stop()
        real.stop()
