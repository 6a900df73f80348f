"""The endpoint's control plane: drives moto's endpoint where moto stands still.

moto hands over `CreateEndpoint` and `UpdateEndpointWeightsAndCapacities` (see `moto_host`);
`switch_config` is a redeploy. Each only records what is wanted and wakes the reconcile thread,
which makes the fleet match: spawn instances of the current deploy up to the desired count,
drain the extra ones (and, after a redeploy, the old ones once the new are InService), replace
an instance that died. The instances a raised count asks for are provisioned from the instant it
was asked for (moto's, the modelled one when the cloud's autoscaler asked), not from when this
thread gets to them. The endpoint status follows the fleet: Creating until the first deploy
is all InService, Updating while instances start or stop, InService otherwise; moto's
`CurrentInstanceCount` is the InService count, `DesiredInstanceCount` the wanted one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tts_bench.local_cloud.control_plane.deploy import Deployment
from tts_bench.local_cloud.control_plane.moto_host import MotoHost
from tts_bench.local_cloud.errors import LocalCloudError
from tts_bench.local_cloud.instances.fleet import LIVE, Fleet, Instance, InstanceState

RECONCILE_EVERY_S = 0.2
# Instances of one deploy that may fail to start before the endpoint is Failed (SageMaker
# fails a deployment whose container never passes its health check, it does not retry forever).
MAX_START_FAILURES = 3


class EndpointControl:
    def __init__(
        self,
        moto: MotoHost,
        fleet: Fleet,
        deployment: Deployment,
        provision_delay_s: float,
        say: Callable[[str], None],
    ) -> None:
        self._moto = moto
        self._fleet = fleet
        self._deployment = deployment
        self._provision_delay_s = provision_delay_s
        self._say = say
        self._lock = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.generation = 0
        self.desired = deployment.initial_count
        self.status = "Creating"
        self.status_history: list[tuple[float, str]] = []
        self._created = False
        self._asked_at: float | None = None  # when the count the next spawns serve was asked for
        self._thread = threading.Thread(target=self._run, name="local-cloud-control", daemon=True)

    @property
    def endpoint_name(self) -> str:
        return self._deployment.endpoint_name

    # ------------------------------------------------------------------ what moto hands over

    def endpoint_created(self, endpoint_name: str) -> None:
        if endpoint_name != self.endpoint_name:
            return
        with self._lock:
            self._created = True
            self._set_status("Creating")
        self.wake()

    def capacity_requested(self, endpoint_name: str, desired: dict[str, int]) -> None:
        count = desired.get(self._deployment.variant_name)
        if endpoint_name != self.endpoint_name or count is None:
            return
        with self._lock:
            if count != self.desired:
                self._say(f"endpoint {endpoint_name}: desired instances {self.desired} → {count}")
            if count > self.desired:
                self._asked_at = self._moto.now_s()  # in moto's request: its (modelled) instant
            self.desired = count
            self._set_status("Updating" if self.status != "Creating" else "Creating")
        self.wake()

    def switch_config(self, deployment: Deployment, config_name: str) -> None:
        """A redeploy: instances of the new config replace the old ones (blue/green)."""
        with self._lock:
            self._deployment = deployment
            self.generation += 1
            self._moto.endpoint(self.endpoint_name).endpoint_config_name = config_name
            self._set_status("Updating")
        self._say(f"endpoint {self.endpoint_name}: updating to {config_name}")
        self.wake()

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def wake(self) -> None:
        self._wake.set()

    def wait_in_service(self, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        with self._lock:
            while self.status != "InService":
                if self.status == "Failed":
                    raise LocalCloudError(
                        f"endpoint {self.endpoint_name} Failed: its instances did not start"
                        + self._last_start_error()
                    )
                left = deadline - time.time()
                if left <= 0:
                    raise LocalCloudError(
                        f"endpoint {self.endpoint_name} not InService within {timeout_s:.0f} s "
                        f"(status {self.status}); see its instances' log streams"
                    )
                self._lock.wait(timeout=min(left, 0.5))

    def _last_start_error(self) -> str:
        """The last instance's reason, or where to look when it gave none."""
        errors = [i.start_error for i in self._fleet.instances() if i.start_error]
        return f": {errors[-1]}" if errors else "; see their log streams (and --server-args)"

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(RECONCILE_EVERY_S)
            self._wake.clear()
            if self._stop.is_set():
                break
            with self._lock:
                if self._created:
                    self._reconcile()

    def _reconcile(self) -> None:  # with the lock held
        instances = self._fleet.instances()
        never_served = [
            i
            for i in instances
            if i.generation == self.generation and i.state == InstanceState.FAILED and not i.url
        ]
        if self.status == "Failed" or len(never_served) >= MAX_START_FAILURES:
            if self.status != "Failed":
                self._say(
                    f"endpoint {self.endpoint_name}: {len(never_served)} instances failed to "
                    "start; see their log streams"
                )
                self._set_status("Failed")
            return
        live = [i for i in instances if i.state in LIVE and not i.stop_requested]
        current = [i for i in live if i.generation == self.generation]
        old = [i for i in live if i.generation != self.generation]
        asked_at, self._asked_at = self._asked_at, None  # a later replacement starts anew
        for _ in range(self.desired - len(current)):
            self._fleet.spawn(
                self._deployment.instance_env,
                self.generation,
                self._provision_delay_s,
                self._deployment.startup_timeout_s,
                asked_at,
            )
        if len(current) > self.desired:
            for instance in _scale_in_order(current)[: len(current) - self.desired]:
                self._fleet.drain(instance)
        serving = [i for i in current if i.state == InstanceState.IN_SERVICE]
        if old and len(serving) >= self.desired:
            for instance in old:
                self._fleet.drain(instance)
        instances = self._fleet.instances()
        settled = (
            len(serving) == self.desired == len(current)
            and not old
            and not any(i.state == InstanceState.DRAINING for i in instances)
        )
        endpoint = self._moto.endpoint(self.endpoint_name)
        for variant in endpoint.production_variants:
            if variant["VariantName"] == self._deployment.variant_name:
                variant["CurrentInstanceCount"] = len(self._fleet.in_service())
                variant["DesiredInstanceCount"] = self.desired
        if settled:
            self._set_status("InService")
        elif self.status == "InService":
            self._set_status("Updating")

    def _set_status(self, status: str) -> None:  # with the lock held
        if status != self.status or not self.status_history:
            if self.status_history:
                self._say(f"endpoint {self.endpoint_name}: {self.status} → {status}")
            self.status = status
            self.status_history.append((time.time(), status))
        self._moto.endpoint(self.endpoint_name).endpoint_status = status
        self._lock.notify_all()


def _scale_in_order(instances: list[Instance]) -> list[Instance]:
    """Not yet serving first, then the least busy, then the newest."""
    return sorted(
        instances,
        key=lambda i: (i.state == InstanceState.IN_SERVICE, i.in_flight, -i.spawned_at),
    )
