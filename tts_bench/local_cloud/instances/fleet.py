"""The fleet of one variant: instance servers, their states, and who is busy.

Each instance is, by default, a real `python -m tts_server` process on its own loopback port,
started with the deployed Model's env; a `launch` function may put another server behind the
same contract (the curve instances, `curve_instance`). Its log stream is opened when it is
spawned (visible before the process exists, as during provisioning), or with
`stream_at_spawn=False` once its provisioning is over: at the instant the provisioning ends on
the cloud's clock, counted from when its count was asked for, and stamped then however late
this thread gets there (`modelled_time`; the server's launch is modelled at that instant too).
Its output is shipped line by line; it is InService once the server is ready (the `ready`
marker logged and `/ping` 200); its pid is in the run's `record` while it runs (`orphans`). `drain` stops routing to it, lets the requests
already routed to it finish (as SageMaker deregisters an instance before it stops it), then
asks it to stop (SIGTERM) and waits for the server's own drain: a request picked in the instant
before the drain reaches a server that still admits it, never one answering 503 `draining`.
`acquire`/`release` count requests in flight per instance (arrival to last byte) and pick by
least outstanding requests.
"""

from __future__ import annotations

import os
import random
import secrets
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.cloudwatch.logs import LogShipper
from tts_bench.local_cloud.errors import LocalCloudError, NoInstanceError
from tts_bench.local_cloud.orphans import ProcessRecord
from tts_bench.serving.local_server import LocalServer, LocalServerError


class InstanceState(StrEnum):
    PENDING = "Pending"  # provisioning (the emulated delay) before the process starts
    STARTING = "Starting"  # the process runs, /ping not yet 200
    IN_SERVICE = "InService"
    DRAINING = "Draining"  # SIGTERM sent, in-flight work finishing
    STOPPED = "Stopped"
    FAILED = "Failed"  # exited or never became ready without being asked to stop


LIVE = (InstanceState.PENDING, InstanceState.STARTING, InstanceState.IN_SERVICE)
GONE = (InstanceState.STOPPED, InstanceState.FAILED)
GONE_KEPT = 64  # records of stopped or failed instances kept (a start failure is read from them)


class InstanceStartError(LocalCloudError):
    """An instance's server did not become ready."""


class InstanceServer(Protocol):
    """What the fleet runs for one instance: started once, ready once, stopped once."""

    @property
    def url(self) -> str: ...

    def start(self, at_s: float | None = None) -> None:
        """Launch it; `at_s`: the instant on the cloud's clock its launch is modelled at (a
        curve instance's start-up runs from it), None for now."""

    def wait_ready(self, timeout_s: float) -> None:
        """Until it serves; `InstanceStartError` when it does not within `timeout_s`."""

    def wait_exit(self) -> int | None:
        """Until it has exited; its exit code."""

    def stop(self) -> int | None:
        """Stop admitting, let in-flight work finish, exit (SIGTERM); the exit code."""

    def kill(self) -> None:
        """Gone at once, connections cut (SIGKILL, a crashed host)."""


# (the Model's env, where to keep its output, the callback for each output line)
Launch = Callable[[dict[str, str], Path | None, Callable[[str], None]], InstanceServer]


class ProcessServer:
    """A `python -m tts_server` process as an `InstanceServer`."""

    def __init__(
        self,
        server_args: Sequence[str],
        env: dict[str, str],
        log_path: Path | None,
        on_line: Callable[[str], None],
        record: ProcessRecord | None = None,
    ) -> None:
        self._server = LocalServer(server_args, env=env, log_path=log_path, on_line=on_line)
        self._record = record  # where its pid is kept while it runs (`orphans`)

    @property
    def url(self) -> str:
        return self._server.url

    def start(self, at_s: float | None = None) -> None:
        self._server.start()
        if self._record is not None and self._server.process is not None:
            self._record.add(self._server.process.pid)

    def wait_ready(self, timeout_s: float) -> None:
        try:
            self._server.wait_ready(timeout_s=timeout_s)
        except LocalServerError as exc:
            self._server.stop()
            raise InstanceStartError(str(exc)) from None

    def wait_exit(self) -> int | None:
        process = self._server.process
        if process is None:
            return None
        code = process.wait()
        if self._record is not None:
            self._record.remove(process.pid)
        return code

    def stop(self) -> int | None:
        return self._server.stop()

    def kill(self) -> None:
        process = self._server.process
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@dataclass
class Instance:
    instance_id: str
    generation: int  # which deploy (endpoint config) it runs
    log_stream: str
    state: InstanceState = InstanceState.PENDING
    in_flight: int = 0
    url: str = ""
    spawned_at: float = field(default_factory=time.time)
    server: InstanceServer | None = None
    exit_code: int | None = None
    stop_requested: bool = False
    start_error: str | None = None  # why it never became ready (the endpoint's Failed names it)


def new_instance_id() -> str:
    return f"i-{secrets.token_hex(8)}"


class Fleet:
    """All instances of one endpoint variant; every method is thread-safe."""

    def __init__(
        self,
        endpoint_name: str,
        variant_name: str,
        shipper: LogShipper,
        server_args: Sequence[str],
        base_env: dict[str, str],
        say: Callable[[str], None],
        on_change: Callable[[], None],
        log_dir: Path | None = None,
        launch: Launch | None = None,
        stream_at_spawn: bool = True,
        record: ProcessRecord | None = None,
        routed_wait_s: float = 60.0,
        clock: ServiceClock | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        self._clock = clock or ServiceClock()
        # How long a drain waits for the requests routed before it (the invocation ceiling:
        # none lasts longer) before the server is stopped with what is left.
        self._routed_wait_s = routed_wait_s
        self.variant_name = variant_name
        self._shipper = shipper
        self._server_args = list(server_args)
        self._base_env = base_env
        self._say = say
        self._on_change = on_change
        self._log_dir = log_dir
        self._launch: Launch = launch or (
            lambda env, log_path, on_line: ProcessServer(
                self._server_args, {**self._base_env, **env}, log_path, on_line, record
            )
        )
        self._stream_at_spawn = stream_at_spawn
        self._lock = threading.Condition()
        self._instances: dict[str, Instance] = {}
        self._concurrency_observers: list[Callable[[int, int], None]] = []

    # ------------------------------------------------------------------ reading

    def instances(self) -> list[Instance]:
        with self._lock:
            return list(self._instances.values())

    def get(self, instance_id: str) -> Instance:
        with self._lock:
            return self._instances[instance_id]

    def in_service(self) -> list[Instance]:
        with self._lock:
            return [i for i in self._instances.values() if i.state == InstanceState.IN_SERVICE]

    def observe_concurrency(self, observer: Callable[[int, int], None]) -> None:
        """`observer(in_flight_total, in_service_count)` on every change of either."""
        with self._lock:
            self._concurrency_observers.append(observer)

    def _notify_concurrency(self) -> None:  # with the lock held
        total = sum(i.in_flight for i in self._instances.values())
        serving = sum(1 for i in self._instances.values() if i.state == InstanceState.IN_SERVICE)
        for observer in self._concurrency_observers:
            observer(total, serving)

    # ------------------------------------------------------------------ routing

    def pick(self) -> Instance:
        """The InService instance with the fewest requests in flight (ties at random),
        LEAST_OUTSTANDING_REQUESTS, not counted: a session is routed so, and `hold` counts
        each request on it."""
        with self._lock:
            ready = [i for i in self._instances.values() if i.state == InstanceState.IN_SERVICE]
            if not ready:
                raise NoInstanceError(
                    f"endpoint {self.endpoint_name} has no InService instance "
                    f"(variant {self.variant_name}); wait for it to be InService"
                )
            least = min(i.in_flight for i in ready)
            return random.choice([i for i in ready if i.in_flight == least])

    def acquire(self) -> Instance:
        """`pick`, counted busy until `release` (one request)."""
        with self._lock:
            chosen = self.pick()
            self.hold(chosen)
            return chosen

    def hold(self, instance: Instance) -> None:
        """Count one more request in flight on `instance`, until `release`."""
        with self._lock:
            instance.in_flight += 1
            self._notify_concurrency()

    def release(self, instance: Instance) -> None:
        with self._lock:
            instance.in_flight -= 1
            self._notify_concurrency()
            self._lock.notify_all()  # a drain may wait for its instance's last request

    # ------------------------------------------------------------------ life cycle

    def spawn(
        self,
        env: dict[str, str],
        generation: int,
        provision_delay_s: float,
        ready_timeout_s: float,
        asked_at_s: float | None = None,
    ) -> Instance:
        """A new instance, provisioned for `provision_delay_s` of the wall clock from
        `asked_at_s` (the cloud's clock: when its count was asked for; None for now)."""
        instance_id = new_instance_id()
        asked = self._clock.now() if asked_at_s is None else asked_at_s
        visible_at = asked + provision_delay_s * self._clock.scale
        instance = Instance(instance_id, generation, f"{self.variant_name}/{instance_id}")
        if self._stream_at_spawn:
            self._shipper.open_stream(self.endpoint_name, instance.log_stream)
        with self._lock:
            self._instances[instance_id] = instance
        self._say(f"instance {instance_id}: provisioning (log stream {instance.log_stream})")
        threading.Thread(
            target=self._run,
            args=(instance, env, visible_at, ready_timeout_s),
            name=f"instance-{instance_id}",
            daemon=True,
        ).start()
        return instance

    def _run(
        self, instance: Instance, env: dict[str, str], visible_at: float, ready_timeout_s: float
    ) -> None:
        # emulated EC2 provisioning and image pull, until `visible_at` of the cloud's clock
        time.sleep(max(0.0, self._clock.to_wall(visible_at) - time.time()))
        if not self._stream_at_spawn and not instance.stop_requested:
            self._shipper.open_stream(self.endpoint_name, instance.log_stream, at_s=visible_at)
        with self._lock:
            if instance.stop_requested:
                self._set(instance, InstanceState.STOPPED)
                self._forget(instance)
                return
            server = self._launch(
                env,
                self._log_dir / f"{instance.instance_id}.log" if self._log_dir else None,
                lambda line: self._shipper.ship(self.endpoint_name, instance.log_stream, line),
            )
            instance.server = server
            server.start(visible_at)
            self._set(instance, InstanceState.STARTING)
        started = time.time()
        try:
            server.wait_ready(ready_timeout_s)
            instance.url = server.url
        except InstanceStartError as exc:
            instance.start_error = str(exc)
            self._say(f"instance {instance.instance_id}: did not become ready: {exc}")
        else:
            with self._lock:
                if not instance.stop_requested:
                    self._set(instance, InstanceState.IN_SERVICE)
            self._say(
                f"instance {instance.instance_id}: InService at {instance.url} after "
                f"{time.time() - started:.1f} s"
            )
        code = server.wait_exit()
        with self._lock:
            instance.exit_code = code
            stopped = instance.stop_requested
            self._set(instance, InstanceState.STOPPED if stopped else InstanceState.FAILED)
            self._forget(instance)
        if not stopped:
            self._say(f"instance {instance.instance_id}: exited unexpectedly (code {code})")

    def _forget(self, instance: Instance) -> None:  # with the lock held
        """A gone instance keeps its record, not its server: a curve instance's server holds its
        queue and a block of random draws, and under a soak's scaling one instance starts every
        few seconds (issue 40: +2.5 MiB in 5 minutes, all of it stopped instances' draws). The
        oldest records go past `GONE_KEPT`, so the fleet's size follows its live instances."""
        instance.server = None
        gone = [i for i in self._instances.values() if i.state in GONE]
        for old in gone[: max(0, len(gone) - GONE_KEPT)]:
            del self._instances[old.instance_id]

    def _set(self, instance: Instance, state: InstanceState) -> None:
        with self._lock:
            instance.state = state
            self._notify_concurrency()
            self._lock.notify_all()
        self._on_change()

    def drain(self, instance: Instance, wait_for_routed: bool = True) -> None:
        """Stop routing to it; once the requests routed to it are done (`wait_for_routed`), at
        most `routed_wait_s`, SIGTERM it: the server finishes what is left, then exits."""
        with self._lock:
            if instance.state in GONE or instance.stop_requested:
                return
            instance.stop_requested = True
            server = instance.server
            if server is not None:
                self._set(instance, InstanceState.DRAINING)
        self._say(f"instance {instance.instance_id}: draining ({instance.in_flight} in flight)")
        if server is not None:
            wait_s = self._routed_wait_s if wait_for_routed else 0.0
            threading.Thread(
                target=self._stop_when_done, args=(instance, server, wait_s), name="drain",
                daemon=True,
            ).start()  # fmt: skip

    def _stop_when_done(self, instance: Instance, server: InstanceServer, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        with self._lock:
            while instance.in_flight > 0 and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(timeout=left)
        server.stop()

    def kill(self, instance_id: str) -> None:
        """SIGKILL the instance's process, as a crashed host would (tests)."""
        server = self.get(instance_id).server
        if server is not None:
            server.kill()

    def stop_all(self, timeout_s: float = 40.0) -> None:
        for instance in self.instances():
            self.drain(instance, wait_for_routed=False)  # the cloud stops: its clients go too
        deadline = time.time() + timeout_s
        with self._lock:
            while any(i.state not in GONE for i in self._instances.values()):
                if time.time() > deadline:
                    break
                self._lock.wait(timeout=0.2)
        for instance in self.instances():  # whatever did not drain in time
            if instance.server is not None and instance.state not in GONE:
                instance.server.kill()
