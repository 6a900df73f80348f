"""moto in this process (`ThreadedMotoServer` on loopback), with the hooks the control plane needs.

moto 5.2.5 stands still where SageMaker moves: an endpoint is InService the moment it is
created, a capacity change is done the moment it is asked for, and `ml.g5.*` is not on its
instance-type list. While a `MotoHost` runs, those three methods of moto's SageMaker backend
are wrapped (in this process only): instance types are accepted, and creation and capacity
changes are handed to a listener (the control plane) before the API call returns, so a
`describe_endpoint` right after sees Creating or Updating, as on SageMaker.

It also fronts the two calls moto lacks that a rehearsal reads, `DescribeAlarmHistory` and
`DescribeScalingActivities`, from the autoscaler's `ScalingHistory`, and runs moto's CloudWatch
and Logs on the cloud's clock (log-stream creation, log ingestion, alarm state times), so that on
a compressed cloud every timestamp a client reads is in the same virtual time.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.scaling_history import ScalingHistory

ACCOUNT = "123456789012"  # moto's default account, and the stack's placeholder one
REGION = "us-east-1"


class EndpointListener(Protocol):
    def endpoint_created(self, endpoint_name: str) -> None: ...

    def capacity_requested(self, endpoint_name: str, desired: dict[str, int]) -> None: ...


class MotoHost:
    """One moto server on 127.0.0.1, started and stopped with the local cloud."""

    def __init__(self, clock: ServiceClock | None = None) -> None:
        self._server: Any = None
        self._restore: list[Callable[[], None]] = []
        self._listener: EndpointListener | None = None
        self._lock = threading.Lock()
        self._clock = clock or ServiceClock()
        self.history = ScalingHistory()  # the autoscaler writes it; the fronted calls read it
        self.url = ""

    def start(self) -> str:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self._patch()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        # moto's backends are this process's globals: a cloud started after another one in the
        # same process (tests) would see its endpoints, log streams and metrics. Start empty.
        reset = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(reset, timeout=30):
            pass
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        for restore in reversed(self._restore):
            restore()
        self._restore.clear()

    def listen(self, listener: EndpointListener | None) -> None:
        with self._lock:
            self._listener = listener

    # ------------------------------------------------------------------ moto's state

    def endpoint(self, name: str) -> Any:
        """moto's own endpoint object: the control plane sets status and counts on it."""
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[ACCOUNT][REGION].endpoints[name]

    # ------------------------------------------------------------------ patches

    def _fronts(self) -> list[tuple[Any, str, Any]]:
        """moto's Logs and CloudWatch on the cloud's clock; the two calls moto lacks, answered
        from the scaling history."""
        import moto.cloudwatch.models
        import moto.logs.models
        from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
        from moto.cloudwatch.responses import CloudWatchResponse
        from moto.core.responses import ActionResult

        host = self

        def cloud_now() -> datetime:
            """moto's `utcnow` (naive UTC) on the cloud's clock."""
            return host._clock.now_datetime().replace(tzinfo=None)

        def describe_alarm_history(self: Any) -> Any:
            params = dict(self._get_params())
            for key in ("StartDate", "EndDate"):
                if isinstance(params.get(key), datetime) and params[key].tzinfo is None:
                    params[key] = params[key].replace(tzinfo=UTC)
            return ActionResult(host.history.describe_alarm_history(params))

        def describe_scaling_activities(self: Any) -> str:
            params = json.loads(self.body or "{}")
            answer = host.history.describe_scaling_activities(params)
            return json.dumps(answer, default=lambda d: d.timestamp())

        activities = (ApplicationAutoScalingResponse, "describe_scaling_activities")
        return [
            (moto.logs.models, "utcnow", cloud_now),
            (moto.cloudwatch.models, "utcnow", cloud_now),
            (CloudWatchResponse, "describe_alarm_history", describe_alarm_history),
            (*activities, describe_scaling_activities),
        ]

    def _patch(self) -> None:
        from moto.sagemaker.models import FakeEndpointConfig, SageMakerModelBackend

        host = self

        def accept_any_instance_type(self: object, instance_type: str) -> None:
            """moto's list predates ml.g5.*; SageMaker validates types itself."""

        original_create = SageMakerModelBackend.create_endpoint
        original_update = SageMakerModelBackend.update_endpoint_weights_and_capacities

        def create_endpoint(self: Any, endpoint_name: str, *args: Any, **kwargs: Any) -> Any:
            endpoint = original_create(self, endpoint_name, *args, **kwargs)
            listener = host._listener
            if listener is not None:
                listener.endpoint_created(endpoint_name)
            return endpoint

        def update_capacity(
            self: Any, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
        ) -> str:
            endpoint = self.endpoints.get(endpoint_name)
            before = {
                v["VariantName"]: v.get("CurrentInstanceCount")
                for v in (endpoint.production_variants if endpoint else [])
            }
            arn = original_update(self, endpoint_name, desired_weights_and_capacities)
            for variant in self.endpoints[endpoint_name].production_variants:
                # moto jumps to the new count at once; the fleet reports the real one.
                if before.get(variant["VariantName"]) is not None:
                    variant["CurrentInstanceCount"] = before[variant["VariantName"]]
            desired = {
                str(c["VariantName"]): int(c["DesiredInstanceCount"])
                for c in desired_weights_and_capacities
                if c.get("DesiredInstanceCount") is not None
            }
            listener = host._listener
            if listener is not None and desired:
                listener.capacity_requested(endpoint_name, desired)
            return arn

        patches: list[tuple[Any, str, Any]] = [
            *self._fronts(),
            (FakeEndpointConfig, "validate_instance_type", accept_any_instance_type),
            (SageMakerModelBackend, "create_endpoint", create_endpoint),
            (SageMakerModelBackend, "update_endpoint_weights_and_capacities", update_capacity),
        ]
        for owner, name, replacement in patches:
            original = owner.__dict__.get(name)
            setattr(owner, name, replacement)
            if original is None:
                self._restore.append(lambda o=owner, n=name: delattr(o, n))
            else:
                self._restore.append(lambda o=owner, n=name, f=original: setattr(o, n, f))
