"""The soaked things, each in a process of its own so its resources are its own: a local cloud
(`tts-bench local-cloud`, as a user starts it) and a plain `python -m tts_server`.

Each gets a TMPDIR of its own (so its entries can be counted) and is started in a session of
its own (a Ctrl-C in the terminal reaches the soak, which stops each in order). A cloud is read
only as a client reads it: the AWS APIs through its env file, its instances' `/ping` at the
URLs its log names.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from tts_bench.aws.clock import CLOUDWATCH_DELAY_S, ServiceClock
from tts_bench.serving.local_server import LocalServer, LocalServerError
from tts_bench.serving.server_ping import PingError, fetch_ping
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, SAGEMAKER_NAMESPACE

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 90.0  # the cloud drains its instances (SageMaker's 30 s each) and moto
# A datapoint is stamped with its window's start and readable a period plus CloudWatch's delay
# after it (in the cloud's virtual seconds): a read reaches that much further back.
READ_LAG_S = 10.0 + CLOUDWATCH_DELAY_S
INSTANCE_UP = re.compile(r"instance (i-[0-9a-f]+): InService at (http://\S+)")
INSTANCE_DOWN = re.compile(r"instance (i-[0-9a-f]+): (?:draining|exited unexpectedly)")


class SoakStartError(Exception):
    """A soaked thing did not start; the message says which and its last log lines."""


def child_env(tmpdir: Path) -> dict[str, str]:
    tmpdir.mkdir(mode=0o700, exist_ok=True)
    paths = [str(REPO), str(REPO / "container"), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "PYTHONUNBUFFERED": "1",
        "TMPDIR": str(tmpdir),
    }


class SoakedCloud:
    """`tts-bench local-cloud` with `cloud_args`, in a child process; `stop` ends it."""

    def __init__(self, name: str, cloud_args: list[str], scratch: Path) -> None:
        self.name = name
        self.tmpdir = scratch / f"tmp-{name}"
        self._env_file = scratch / f"{name}.env"
        self._log_path = scratch / f"{name}.log"
        self._log = open(self._log_path, "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tts_bench", "local-cloud", *cloud_args,
             "--env-file", str(self._env_file)],
            env=child_env(self.tmpdir), stdout=subprocess.DEVNULL, stderr=self._log,
            start_new_session=True,
        )  # fmt: skip
        self.pid = self.process.pid
        self.env: dict[str, str] = {}
        self.endpoint = ""
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def wait_started(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._env_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SoakStartError(f"the {self.name} cloud did not start: {self.tail()}")
            if stop.wait(0.5):
                return
        lines = self._env_file.read_text().splitlines()
        self.env = dict(line.split("=", 1) for line in lines if "=" in line)
        found = re.findall(r"endpoint (\S+) is InService", self._log_path.read_text())
        self.endpoint = found[-1]

    def tail(self, count: int = 4) -> str:
        lines = self._log_path.read_text(errors="replace").splitlines()[-count:]
        return " | ".join(lines) or "(no output)"

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                url = self.env["AWS_ENDPOINT_URL"]
                if service == "sagemaker-runtime":
                    url = self.env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"]
                self._clients[service] = boto3.client(
                    service,
                    endpoint_url=url,
                    region_name=self.env["AWS_REGION"],
                    aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                    aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
                    config=Config(max_pool_connections=64, retries={"max_attempts": 1}),
                )
            return self._clients[service]

    def runtime_address(self) -> tuple[str, int]:
        host, port = (
            self.env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"].removeprefix("http://").split(":")
        )
        return host, int(port)

    def ping_urls(self) -> list[str]:
        """The instances the cloud's log says are InService and not yet draining."""
        text = self._log_path.read_text(errors="replace")
        up = dict(INSTANCE_UP.findall(text))
        for instance in INSTANCE_DOWN.findall(text):
            up.pop(instance, None)
        return list(up.values())

    def describe(self) -> tuple[str, int]:
        """The endpoint's status and CurrentInstanceCount, as DescribeEndpoint answers."""
        answer = self.client("sagemaker").describe_endpoint(EndpointName=self.endpoint)
        variant = answer["ProductionVariants"][0]
        return answer["EndpointStatus"], int(variant.get("CurrentInstanceCount", 0))

    def set_desired(self, count: int) -> bool:
        """UpdateEndpointWeightsAndCapacities; False when the endpoint is not InService."""
        if self.describe()[0] != "InService":
            return False
        variant = self.client("sagemaker").describe_endpoint(EndpointName=self.endpoint)
        name = variant["ProductionVariants"][0]["VariantName"]
        self.client("sagemaker").update_endpoint_weights_and_capacities(
            EndpointName=self.endpoint,
            DesiredWeightsAndCapacities=[{"VariantName": name, "DesiredInstanceCount": count}],
        )
        return True

    def concurrency(self, wall_window_s: float) -> float:
        """The largest ConcurrentRequestsPerModel datapoint readable for the last
        `wall_window_s` of wall time (the cloud's in-flight counter, as CloudWatch reads it);
        NaN when none is."""
        clock = ServiceClock.from_environment(self.env)
        end = clock.now()
        start = clock.to_virtual(time.time() - wall_window_s) - READ_LAG_S
        variant = self.client("sagemaker").describe_endpoint(EndpointName=self.endpoint)
        answer = self.client("cloudwatch").get_metric_data(
            MetricDataQueries=[{
                "Id": "c",
                "MetricStat": {
                    "Metric": {
                        "Namespace": SAGEMAKER_NAMESPACE,
                        "MetricName": CONCURRENT_REQUESTS_PER_MODEL,
                        "Dimensions": [
                            {"Name": "EndpointName", "Value": self.endpoint},
                            {"Name": "VariantName",
                             "Value": variant["ProductionVariants"][0]["VariantName"]},
                        ],
                    },
                    "Period": 10,
                    "Stat": "Maximum",
                },
            }],
            StartTime=datetime.fromtimestamp(start, tz=UTC),
            EndTime=datetime.fromtimestamp(end, tz=UTC),
        )["MetricDataResults"][0]  # fmt: skip
        return max(answer["Values"], default=math.nan)  # none read is no reading, not a 0

    def scaling_activities(self) -> list[str]:
        """Each scaling activity's description, oldest first."""
        variant = self.client("sagemaker").describe_endpoint(EndpointName=self.endpoint)
        resource = (
            f"endpoint/{self.endpoint}/variant/{variant['ProductionVariants'][0]['VariantName']}"
        )
        pages = self.client("application-autoscaling").get_paginator("describe_scaling_activities")
        found = [
            a["Description"]
            for page in pages.paginate(ServiceNamespace="sagemaker", ResourceId=resource)
            for a in page["ScalingActivities"]
        ]
        return list(reversed(found))

    def stop(self) -> None:
        """SIGTERM (the cloud stops its instances and moto), SIGKILL to its group if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()


class SoakedServer:
    """A plain `python -m tts_server` (onnx backend) in a child process."""

    def __init__(self, name: str, server_args: list[str], scratch: Path) -> None:
        self.name = name
        self.tmpdir = scratch / f"tmp-{name}"
        self.server = LocalServer(server_args, env=child_env(self.tmpdir)).start()
        assert self.server.process is not None  # started above
        self.pid = self.server.process.pid
        self.url = ""

    def wait_started(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not stop.is_set():  # in short waits, so a Ctrl-C is heard
            try:
                self.server.wait_ready(2.0)
            except LocalServerError as exc:
                if self.server.process is None or self.server.process.poll() is not None:
                    raise SoakStartError(f"the {self.name} did not start: {exc}") from None
                if time.monotonic() > deadline:
                    raise SoakStartError(f"the {self.name} was not ready in time: {exc}") from None
                continue
            self.url = self.server.url
            return

    def ping_urls(self) -> list[str]:
        return [self.url] if self.url else []

    def stop(self) -> None:
        self.server.stop()


def in_flight(urls: list[str]) -> int:
    """The servers' own in-flight counts (queued + executing), summed; gone ones skipped."""
    total = 0
    for url in urls:
        try:
            total += fetch_ping(url, timeout_s=5.0).in_flight
        except PingError:
            continue
    return total
