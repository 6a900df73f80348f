"""The local cloud as one object: moto, the runtime, the fleet and its control loops, deployed.

`local_cloud(settings)` starts everything, deploys the stack's recorded preview, waits until
the endpoint is InService and yields a `LocalCloud`; on exit every thread and every instance
process it started is stopped. The clients it hands out (`env`) reach moto for the control
plane and the runtime for the data plane and Service Quotas, and say how to read its clock.
With `settings.curve` its instances are curve instances (`curve_fleet`), and its clock may run
`settings.time_scale` times faster than the wall clock.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from tts_bench.aws.clock import ENV_TIME_ORIGIN, ENV_TIME_SCALE, ServiceClock
from tts_bench.deployment import local_image_reference
from tts_bench.infra.stack_config import stack_file
from tts_bench.local_cloud.cloudwatch.logs import LogShipper
from tts_bench.local_cloud.cloudwatch.metrics import MetricsPublisher, VariantMetrics, WindowFigures
from tts_bench.local_cloud.control_plane.deploy import (
    Deployment,
    apply_deployment,
    deployment_from_recording,
    local_overrides,
    new_suffix,
    record_stack,
    require_command_for_package,
    stack_max_instances,
)
from tts_bench.local_cloud.control_plane.endpoint import EndpointControl
from tts_bench.local_cloud.control_plane.moto_host import MotoHost
from tts_bench.local_cloud.data_plane.bidi_bridge import BidiBridge
from tts_bench.local_cloud.data_plane.bidi_session import SessionLease
from tts_bench.local_cloud.data_plane.runtime import Runtime, Served
from tts_bench.local_cloud.data_plane.tls import make_local_tls
from tts_bench.local_cloud.errors import LocalCloudError
from tts_bench.local_cloud.instances.container_command import (
    command_digest,
    command_launcher,
    parse_command,
)
from tts_bench.local_cloud.instances.curve_fleet import CurveFleet
from tts_bench.local_cloud.instances.curve_instance import CurveHost
from tts_bench.local_cloud.instances.fleet import Fleet
from tts_bench.local_cloud.instances.image_digest import local_image_digest
from tts_bench.local_cloud.orphans import ProcessRecord
from tts_bench.local_cloud.private_files import new_run_folder
from tts_bench.local_cloud.settings import (
    MAX_PROVISION_DELAY_S,
    REGION,
    LocalCloudSettings,
    instance_cap,
)
from tts_bench.local_cloud.signals import signals_held

ACCESS_KEY = "testing"  # moto accepts any; these say what they are
START_TIMEOUT_S = 600.0
# The variables a client needs, in the order they are printed.
ENV_KEYS = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
    "AWS_ENDPOINT_URL_SERVICE_QUOTAS",
    "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2",
    "SSL_CERT_FILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    ENV_TIME_SCALE,
    ENV_TIME_ORIGIN,
)


def _say_nothing(_: str) -> None:
    pass


def instance_base_env(program_dir: Path) -> dict[str, str]:
    """The environment of every instance process before the Model's env: this machine's, with
    the container package and this checkout importable."""
    env = dict(os.environ)
    paths = [str(program_dir / "container"), str(program_dir), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class LocalCloud:
    """A started local cloud. Use `local_cloud(...)`; `deploy` again after a new plan."""

    def __init__(self, settings: LocalCloudSettings, say: Callable[[str], None]) -> None:
        self.settings = settings
        self._say = say
        self.curve = CurveFleet.load(settings.curve) if settings.curve else None
        self.clock = ServiceClock.starting_now(settings.time_scale)
        self.moto = MotoHost(self.clock)
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self.env: dict[str, str] = {}
        self.deployment: Deployment | None = None
        self.fleet: Fleet | None = None
        weight = settings.curve.rate_scale * settings.time_scale if settings.curve else 1.0
        self.metrics = VariantMetrics(request_weight=weight, clock=self.clock)
        self.control: EndpointControl | None = None
        self._runtime: Runtime | None = None
        self._publisher: MetricsPublisher | None = None
        self._shipper: LogShipper | None = None
        self._autoscaler: Any = None
        self._image_digest: str | None = None
        self._stack_max_instances = 1
        self._stoppers: list[Callable[[], None]] = []
        self._record: ProcessRecord | None = None
        # SageMaker's 60 s by default; a test may lower it for one request and restore it.
        self.ceiling_s = settings.invocation_ceiling_s

    # ------------------------------------------------------------------ the contract

    @property
    def endpoint_name(self) -> str:
        return self._deployed.endpoint_name

    @property
    def variant_name(self) -> str:
        return self._deployed.variant_name

    @property
    def _deployed(self) -> Deployment:
        if self.deployment is None:
            raise LocalCloudError("nothing is deployed yet")
        return self.deployment

    def deploy(self, plans_dir: Path | None = None) -> None:
        """Record the stack's program (with `plans_dir` as its measurementsDir when given) and
        create what it records; a second call replaces the endpoint's instances and policies."""
        curve = self.curve
        if self._image_digest is None:
            self._image_digest = self._local_digest()
        overrides = {
            **self.settings.stack_overrides,
            **(curve.stack_overrides() if curve else {}),
            **local_overrides(
                self.settings.program_dir,
                self.settings.stack,
                self._image_digest,
                self.settings.container_cmd,
            ),
        }
        if curve is not None and plans_dir is None:
            with signals_held():  # the folder and its remover recorded as one step
                scratch = Path(tempfile.mkdtemp(prefix="tts-bench-curve-plans-"))
                self._stoppers.append(lambda: shutil.rmtree(scratch, ignore_errors=True))
            plans_dir = curve.plans_dir(scratch)
        if plans_dir is not None:
            overrides["measurementsDir"] = str(Path(plans_dir).resolve())
        self._say(f"recording the program's resources for stack {self.settings.stack}")
        recording = record_stack(self.settings.program_dir, self.settings.stack, overrides)
        self._stack_max_instances = stack_max_instances(
            self.settings.program_dir, self.settings.stack, overrides
        )
        deployment = deployment_from_recording(
            recording, self._image_digest, self.settings.instances, new_suffix()
        )
        check_counts(deployment, self.instance_limit(), instance_cap(self.settings))
        self.moto.instance_limit = self.instance_limit()
        self.moto.refuse_while_updating = self.settings.aws_semantics.refuse_while_updating
        self.moto.machine_limit = instance_cap(self.settings)
        if self.settings.instance_env:
            env = {**deployment.instance_env, **self.settings.instance_env}
            deployment = replace(deployment, instance_env=env)
        if curve is not None:
            deployment = curve.mark(deployment)
        for log in recording.logs:
            if log.level in ("info", "warning"):
                self._say(f"program: {log.message}")
        first = self.deployment is None
        if not first and deployment.endpoint_name != self.endpoint_name:
            raise LocalCloudError(
                f"the stack now names endpoint {deployment.endpoint_name}, not {self.endpoint_name}; "
                "start a new local cloud for it"
            )
        if first:
            with signals_held():  # threads started and their stoppers recorded, as one step
                self._start_endpoint(deployment)
        control = self.control
        assert control is not None  # set by _start_endpoint
        scaling = "with scaling policies" if deployment.policies else "without scaling"
        self._say(
            f"deploying {deployment.endpoint_name} ({deployment.instance_type}, "
            f"{deployment.initial_count} instance(s), {scaling}, image {self._image_digest[:19]}…)"
        )
        if deployment.model_package is not None:  # what the Model names, held here
            image = local_image_reference(self._image_digest)
            self.moto.hold_model_package(deployment.model_package, image, self._image_digest)
        apply_deployment(
            deployment,
            self.client,
            endpoint_exists=not first,
            switch_config=lambda name: control.switch_config(deployment, name),
        )
        self.deployment = deployment
        if self._autoscaler is not None:
            self._autoscaler.reload()

    def _local_digest(self) -> str:
        """The digest the deployed image is pinned to: the ladder's for curve instances, the
        container command's, or the working tree's `python -m tts_server`."""
        if self.curve is not None:
            return self.curve.fingerprint.image_digest
        if self.settings.container_cmd is not None:
            return command_digest(parse_command(self.settings.container_cmd))
        return local_image_digest(
            self.settings.server_args, instance_base_env(self.settings.program_dir)
        )

    def wait_in_service(self, timeout_s: float) -> None:
        if self.control is None:
            raise LocalCloudError("nothing is deployed yet")
        self.control.wait_in_service(timeout_s)

    # ------------------------------------------------------------------ helpers for callers

    def client(self, service: str) -> Any:
        """A boto3 client on moto (control plane) or the runtime (data plane); made once."""
        import boto3
        from botocore.config import Config

        with self._clients_lock:
            if service not in self._clients:
                url = self.env["AWS_ENDPOINT_URL"]
                if service == "sagemaker-runtime":
                    url = self.env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"]
                elif service == "service-quotas":
                    url = self.env["AWS_ENDPOINT_URL_SERVICE_QUOTAS"]
                made = boto3.client(
                    service,
                    region_name=REGION,
                    endpoint_url=url,
                    aws_access_key_id=ACCESS_KEY,
                    aws_secret_access_key=ACCESS_KEY,
                    config=Config(max_pool_connections=64, retries={"max_attempts": 1}),
                )
                # The cloud's own acts reach moto stamped at their modelled instants.
                made.meta.events.register("before-sign", self.moto.stamping())
                self._clients[service] = made
            return self._clients[service]

    @contextmanager
    def open_session(self, endpoint_name: str) -> Iterator[SessionLease]:
        """The bidi bridge's hook: the session's InService instance (least outstanding requests
        when it opens), whose requests count in flight while each is served, as SageMaker
        counts a request (an idle session counts nothing); `NoInstanceError` when none is
        InService."""
        served = self.served(endpoint_name)
        if served is None:
            raise LocalCloudError(f"endpoint {endpoint_name} not found")
        if self.curve is not None:
            raise LocalCloudError(
                f"endpoint {endpoint_name} runs curve instances, which serve /invocations only: "
                "bidirectional streaming needs real instances"
            )
        fleet = self.fleet
        assert fleet is not None  # `served` found the endpoint
        instance = fleet.pick()
        yield SessionLease(
            instance.url.replace("http://", "ws://") + "/invocations-bidirectional-stream",
            request_began=lambda: fleet.hold(instance),
            request_ended=lambda: fleet.release(instance),
        )

    # ------------------------------------------------------------------ RuntimeBackend

    def served(self, endpoint_name: str) -> Served | None:
        if self.deployment is None or self.fleet is None or endpoint_name != self.endpoint_name:
            return None
        return Served(self.fleet, self.metrics, self.variant_name)

    def invocation_ceiling_s(self) -> float:
        return self.ceiling_s

    def account(self) -> str:
        return self.moto.account

    def quotas(self) -> dict[str, int]:
        return {self._deployed.instance_type: self.instance_limit()}

    def instance_limit(self) -> int:
        """The emulated quota: the setting, else the stack's maxInstances, never more than
        this machine is asked to run."""
        quota = self.settings.instance_quota or self._stack_max_instances
        return min(quota, instance_cap(self.settings))

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """moto, the runtime and the bidi bridge; a stop signal waits until each is started
        and recorded in `_stoppers`, so `stop` finds everything there is to stop."""
        with signals_held():
            self._start()

    def _start(self) -> None:
        moto_url = self.moto.start()
        self._stoppers.append(self.moto.stop)
        self._runtime = Runtime(self)
        runtime_url = self._runtime.start()
        self._stoppers.append(self._runtime.stop)
        self.env = {
            "AWS_ENDPOINT_URL": moto_url,
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": runtime_url,
            "AWS_ENDPOINT_URL_SERVICE_QUOTAS": runtime_url,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": ACCESS_KEY,
            **self.clock.env(),
        }
        self._shipper = LogShipper(self.client, self.clock)
        self._stoppers.append(self._shipper.close)
        # Bidirectional streaming: HTTP/2 over TLS with a CA made here (the bidi bridge), its
        # files in this run's private folder, removed at stop (`private_files` says why).
        tls_dir = new_run_folder(self._say)
        self._stoppers.append(lambda: shutil.rmtree(tls_dir, ignore_errors=True))
        # What the next start needs to stop our instances if this process is killed (`orphans`).
        self._record = ProcessRecord(tls_dir)
        bridge = BidiBridge(make_local_tls(tls_dir), self.open_session)
        bridge.start()
        self._stoppers.append(bridge.stop)
        self.env.update(bridge.client_env())
        self._say(
            f"moto at {moto_url}; the SageMaker runtime at {runtime_url}; "
            f"bidirectional streaming at {bridge.url}"
        )

    def _start_endpoint(self, deployment: Deployment) -> None:
        """The fleet, its control plane, metrics and autoscaling, for the first deploy."""
        from tts_bench.local_cloud.cloudwatch.autoscaling import Autoscaler

        assert self._shipper is not None  # start() ran
        control_ref: list[EndpointControl] = []
        launch, provision_delay_s = None, self.settings.provision_delay_s
        if self.curve is not None:
            host = CurveHost()
            self._stoppers.append(host.stop)
            launch = self.curve.launcher(host, self.clock)
            provision_delay_s = self.curve.provisioning_wall_s(self.clock)
        elif self.settings.container_cmd is not None:
            words = parse_command(self.settings.container_cmd)
            launch = command_launcher(
                words, instance_base_env(self.settings.program_dir), self._record
            )
        self.fleet = Fleet(
            deployment.endpoint_name,
            deployment.variant_name,
            self._shipper,
            self.settings.server_args,
            instance_base_env(self.settings.program_dir),
            self._say,
            on_change=lambda: control_ref[0].wake() if control_ref else None,
            log_dir=self.settings.log_dir,
            launch=launch,
            stream_at_spawn=self.curve is None,  # a curve instance is visible once provisioned
            clock=self.clock,
            record=self._record,
            routed_wait_s=self.ceiling_s,
        )
        self.fleet.observe_concurrency(self.metrics.observe_concurrency)
        self._stoppers.append(self.fleet.stop_all)
        self.control = EndpointControl(
            self.moto, self.fleet, deployment, provision_delay_s, self._say
        )
        control_ref.append(self.control)
        self.moto.listen(self.control)
        self.control.start()
        self._stoppers.append(self.control.stop)
        self._autoscaler = Autoscaler(
            self.client,
            self.metrics,
            deployment.endpoint_name,
            deployment.variant_name,
            self.settings.scaling_time_scale,
            self._say,
            history=self.moto.history,
            semantics=self.settings.aws_semantics,
            delay_s=self.settings.cloudwatch_delay_s,
        )
        self._publisher = MetricsPublisher(
            self.metrics,
            self.client,
            deployment.endpoint_name,
            deployment.variant_name,
            on_window=self._on_window,
            clock=self.clock,
            delay_s=self.settings.cloudwatch_delay_s,
        )
        self._publisher.start()
        self._stoppers.append(self._publisher.stop)

    def _on_window(self, figures: WindowFigures) -> None:
        if self._autoscaler is None:
            return
        try:
            self._autoscaler.evaluate(figures.start_s)
        except Exception as exc:  # e.g. a desired count past the quota: the metrics go on
            self._say(f"autoscaling: {type(exc).__name__}: {exc}")

    def stop(self) -> None:
        """Stop in reverse order of start: control loops, instances, runtime, logs, moto. A
        stop signal arriving meanwhile is delivered once everything is stopped."""
        with signals_held():
            self._stop()

    def _stop(self) -> None:
        self.moto.listen(None)
        while self._stoppers:
            stopper = self._stoppers.pop()
            try:
                stopper()
            except Exception as exc:  # keep stopping the rest
                self._say(f"while stopping: {type(exc).__name__}: {exc}")


def check_settings(settings: LocalCloudSettings) -> None:
    """Refuse counts and delays that cannot run, before anything starts."""
    cap = instance_cap(settings)
    if settings.instances is not None and not 1 <= settings.instances <= cap:
        what = "a curve instance" if settings.curve is not None else "each a server process"
        raise LocalCloudError(
            f"--instances {settings.instances}: give 1 to {cap} ({what} on this machine)"
        )
    if settings.container_cmd is not None:
        if settings.curve is not None or settings.server_args:
            other = "--instance-model curve" if settings.curve else "--server-args"
            raise LocalCloudError(
                f"--container-cmd and {other}: an instance runs either the command or "
                "`python -m tts_server`"
            )
        parse_command(settings.container_cmd)
    if stack_file(settings.program_dir, settings.stack).is_file():
        require_command_for_package(settings.program_dir, settings.stack, settings.container_cmd)
    if settings.instance_quota is not None and settings.instance_quota < 1:
        raise LocalCloudError(f"instance_quota {settings.instance_quota}: give at least 1")
    if not 0 <= settings.provision_delay_s <= MAX_PROVISION_DELAY_S:
        raise LocalCloudError(
            f"--provision-delay-s {settings.provision_delay_s:g}: give 0 to "
            f"{MAX_PROVISION_DELAY_S:g} s"
        )


def check_counts(deployment: Deployment, limit: int, cap: int) -> None:
    """Refuse a deploy whose counts the API calls it makes would be refused for, before any
    instance is spawned: more initial instances than the quota (`limit`), a scaling maximum
    past what this machine runs (`cap`)."""
    if deployment.initial_count > limit:
        raise LocalCloudError(
            f"the initial instance count {deployment.initial_count} is above the instance limit "
            f"of {limit} (the stack's maxInstances as the emulated quota, at most {cap} on this "
            "machine); lower --instances or the stack's config"
        )
    if (deployment.max_instances or 0) > cap:
        raise LocalCloudError(
            f"the scalable target's MaxCapacity {deployment.max_instances} is more instances "
            f"than the local cloud runs on this machine ({cap}); lower the stack's maxInstances"
        )


@contextmanager
def local_cloud(
    settings: LocalCloudSettings, say: Callable[[str], None] = _say_nothing
) -> Iterator[LocalCloud]:
    """Start moto in-process + the runtime on loopback, deploy, wait InService; stop everything
    on exit."""
    check_settings(settings)
    check_clock_settings(settings)
    cloud = LocalCloud(settings, say)
    try:
        cloud.start()
        cloud.deploy()
        cloud.wait_in_service(START_TIMEOUT_S)
        say(f"endpoint {cloud.endpoint_name} is InService")
        yield cloud
    finally:
        cloud.stop()


def check_clock_settings(settings: LocalCloudSettings) -> None:
    """One line for a time setting the cloud cannot honour."""
    if not (settings.time_scale > 0 and settings.time_scale < float("inf")):
        raise LocalCloudError(f"--time-scale {settings.time_scale:g}: give a positive number")
    if settings.time_scale != 1.0 and settings.curve is None:
        raise LocalCloudError(
            "--time-scale needs --instance-model curve: a real instance starts and serves at the "
            "wall clock's pace, so its start-up and metrics cannot be compressed"
        )
    if not settings.cloudwatch_delay_s >= 0:
        raise LocalCloudError("--cloudwatch-delay-s must not be negative")
    if settings.curve is not None and settings.provision_delay_s:
        raise LocalCloudError(
            "--provision-delay-s: curve instances provision along the ttotal artifact's stages"
        )
