"""moto in this process (`ThreadedMotoServer` on loopback), with the hooks the control plane needs.

moto 5.2.5 stands still where SageMaker moves: an endpoint is InService the moment it is
created, a capacity change is done the moment it is asked for, and `ml.g5.*` is not on its
instance-type list. While a `MotoHost` runs, those three methods of moto's SageMaker backend
are wrapped (in this process only): instance types are accepted, and creation and capacity
changes are handed to a listener (the control plane) before the API call returns, so a
`describe_endpoint` right after sees Creating or Updating, as on SageMaker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

ACCOUNT = "123456789012"  # moto's default account, and the stack's placeholder one
REGION = "us-east-1"


class EndpointListener(Protocol):
    def endpoint_created(self, endpoint_name: str) -> None: ...

    def capacity_requested(self, endpoint_name: str, desired: dict[str, int]) -> None: ...


class MotoHost:
    """One moto server on 127.0.0.1, started and stopped with the local cloud."""

    def __init__(self) -> None:
        self._server: Any = None
        self._restore: list[Callable[[], None]] = []
        self._listener: EndpointListener | None = None
        self._lock = threading.Lock()
        self.url = ""

    def start(self) -> str:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self._patch()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
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

        patches = [
            (FakeEndpointConfig, "validate_instance_type", accept_any_instance_type),
            (SageMakerModelBackend, "create_endpoint", create_endpoint),
            (SageMakerModelBackend, "update_endpoint_weights_and_capacities", update_capacity),
        ]
        for owner, name, replacement in patches:
            original = owner.__dict__[name]
            setattr(owner, name, replacement)
            self._restore.append(lambda o=owner, n=name, f=original: setattr(o, n, f))
