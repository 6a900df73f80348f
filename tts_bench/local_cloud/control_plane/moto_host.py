"""moto in this process (its WSGI app on a loopback werkzeug server), with the hooks the control
plane needs.

moto 5.2.5 stands still where SageMaker moves: an endpoint is InService the moment it is
created, a capacity change is done the moment it is asked for, and `ml.g5.*` is not on its
instance-type list. While a `MotoHost` runs, those three methods of moto's SageMaker backend
are wrapped (in this process only): instance types are accepted, and creation and capacity
changes are handed to a listener (the control plane) before the API call returns, so a
`describe_endpoint` right after sees Creating or Updating, as on SageMaker.

CreateModel keeps the `EnableNetworkIsolation` it is given, which moto drops, and the host can
hold a model package under a seller's ARN (`hold_model_package`), so a package stack's Model
reads back as it was created and its package as SageMaker describes it.

It also fronts the two calls moto lacks that a rehearsal reads, `DescribeAlarmHistory` and
`DescribeScalingActivities`, from the autoscaler's `ScalingHistory`, and runs moto's CloudWatch
and Logs on the cloud's clock (log-stream creation, log ingestion, alarm state times), so that on
a compressed cloud every timestamp a client reads is in the same virtual time; a request of the
cloud's own may name the instant its act is modelled at, and is stamped then (`modelled_time`:
a thread of the cloud that gets there late does not move what it records). Its datapoints
age as CloudWatch's do (`metric_retention`): rolled up past 3 hours of that clock, dropped past
455 days, so moto's datapoints do not pile up with every 10 s a compressed cloud publishes; and
moto keeps no list of every model object it ever made (its dashboard's, which no one here
reads), so what is rolled up or deleted is freed.

moto's backends are process globals; each host serves an account of its own (moto reads it
from the `x-moto-account-id` header, which the host sets on every request it serves), so two
clouds in one process, or one after another, never see each other's resources. The patches on
moto's classes are installed once for all hosts and find the host by the account they serve.

Counts are checked where AWS checks them, before anything starts: a desired instance count
below 1 or above the endpoint's instance limit (the emulated quota, never more than the
instances this machine is asked to run) is refused with ResourceLimitExceeded, and so is a
SageMaker scalable target with a negative bound or a minimum above its maximum. A maximum above
the quota is accepted, as AWS accepts it (scaling past the quota is what fails), unless it is
more instances than this machine is ever asked to run. Every request passes `moto_guard` first,
so malformed calls are 4xx answers, never moto's tracebacks.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.cloudwatch.metric_retention import PASS_EVERY_S, roll_up
from tts_bench.local_cloud.cloudwatch.scaling_history import ScalingHistory
from tts_bench.local_cloud.control_plane.moto_guard import AwsRequestGuard
from tts_bench.local_cloud.modelled_time import requested_instant, stamping
from tts_bench.local_cloud.settings import ACCOUNT, MAX_LOCAL_INSTANCES, REGION

# CreateModelPackage's fields a held package leaves out.
_PACKAGE_FIELDS_UNSET = (
    "validation_specification", "source_algorithm_specification", "tags", "metadata_properties",
    "model_metrics", "client_token", "customer_metadata_properties", "drift_check_baselines",
    "domain", "task", "sample_payload_url", "additional_inference_specifications",
)  # fmt: skip


class EndpointListener(Protocol):
    def endpoint_created(self, endpoint_name: str) -> None: ...

    def capacity_requested(self, endpoint_name: str, desired: dict[str, int]) -> None: ...


def existing_bound(target: Any, which: str) -> int | None:
    value = getattr(target, f"{which}_capacity", None)
    return int(value) if value is not None else None


def scalable_bounds_problem(
    low: int | None, high: int | None, machine_limit: int = MAX_LOCAL_INSTANCES
) -> str | None:
    """Why a SageMaker variant's scalable target may not have these bounds, or None."""
    if (low is not None and low < 0) or (high is not None and high < 0):
        return f"MinCapacity {low} and MaxCapacity {high} must not be negative"
    if low is not None and high is not None and low > high:
        return f"Minimum capacity {low} cannot be greater than maximum capacity {high}"
    if high is not None and high > machine_limit:
        return (
            f"MaxCapacity {high} is more instances than the local cloud runs on this machine "
            f"({machine_limit})"
        )
    return None


class _SharedMoto:
    """What every `MotoHost` of this process shares: moto's backends (process globals, one set
    per account) and the patches on moto's classes, installed while any host runs. Each host
    serves an account of its own, so two clouds in one process never see each other's
    resources, and a patch finds its host by the account of the backend or request it serves
    (or, for moto's clock, by the host whose server thread runs the request)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hosts: dict[str, MotoHost] = {}
        self._restore: list[Callable[[], None]] = []
        self._request = threading.local()

    def join(self, host: MotoHost) -> str:
        """An account of its own for `host`, empty; the patches installed with the first."""
        with self.lock:
            account = next(
                str(int(ACCOUNT) + i) for i in range(len(self.hosts) + 1)
                if str(int(ACCOUNT) + i) not in self.hosts
            )  # fmt: skip
            _forget_account(account)  # a host of an earlier test may have left it filled
            if not self.hosts:
                self._restore = _install_patches(self)
            self.hosts[account] = host
            return account

    def leave(self, account: str) -> None:
        with self.lock:
            if self.hosts.pop(account, None) is None:
                return
            _forget_account(account)
            if not self.hosts:
                for restore in reversed(self._restore):
                    restore()
                self._restore = []

    def host(self, account: str) -> MotoHost | None:
        return self.hosts.get(account)

    def serving(self) -> MotoHost | None:
        """The host whose server runs the request on this thread, if any."""
        return getattr(self._request, "host", None)

    def modelled(self, host: MotoHost) -> float | None:
        """The instant the request this thread serves for `host` is modelled at, if it says."""
        return getattr(self._request, "at_s", None) if self.serving() is host else None

    def wrap(self, host: MotoHost, app: Any) -> Any:
        """`app` answering for `host`'s account (moto reads `x-moto-account-id`), with the
        host, and the instant the cloud's own request is modelled at, known to this thread
        while it answers (`modelled_time`)."""

        def answer(environ: dict[str, Any], start_response: Any) -> Any:
            environ["HTTP_X_MOTO_ACCOUNT_ID"] = host.account
            self._request.host = host
            self._request.at_s = requested_instant(environ, host.token)
            try:
                return app(environ, start_response)
            finally:
                self._request.host = self._request.at_s = None

        return answer


def _forget_account(account: str) -> None:
    """Drop every moto backend of `account` (moto's own reset empties all accounts)."""
    from moto.core.base_backend import BackendDict

    for backends in list(BackendDict._instances):  # type: ignore[misc]
        specific = backends.pop(account, None)
        if specific is not None:
            specific.reset()


_SHARED = _SharedMoto()


class MotoHost:
    """One moto server on 127.0.0.1, started and stopped with the local cloud; its resources
    live in an account of its own (`account`, `ACCOUNT` for the only one of a process)."""

    def __init__(self, clock: ServiceClock | None = None) -> None:
        self._server: Any = None
        self._listener: EndpointListener | None = None
        self._lock = threading.Lock()
        self._clock = clock or ServiceClock()
        self.history = ScalingHistory()  # the autoscaler writes it; the fronted calls read it
        self.token = secrets.token_hex(16)  # what the cloud's own modelled instants carry
        self.url = ""
        self.account = ACCOUNT  # the one it serves, once started
        self._thread: threading.Thread | None = None
        # The most instances one endpoint variant may be asked for (set by the cloud once it
        # knows the stack's quota); None: no endpoint of ours yet. `machine_limit`: the most a
        # scalable target may name, whatever the quota (the cloud sets it for its instance model).
        self.instance_limit: int | None = None
        # SageMaker refuses a capacity change while the endpoint is Updating (the variant set's
        # `refuse_while_updating`; docs/aws-semantics.md).
        self.refuse_while_updating = True
        self.machine_limit = MAX_LOCAL_INSTANCES

    def start(self) -> str:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class QuietHandler(MotoRequestHandler):
            def log_error(self, format: str, *args: Any) -> None:
                """A malformed request line is the client's mistake: a debug line, no error."""
                logging.getLogger("werkzeug").debug(format, *args)

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self.account = _SHARED.join(self)
        guarded = AwsRequestGuard(DomainDispatcherApplication(create_backend_app))
        app = _SHARED.wrap(self, guarded)
        self._server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="local-cloud-moto", daemon=True
        )
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        _SHARED.leave(self.account)

    def listen(self, listener: EndpointListener | None) -> None:
        with self._lock:
            self._listener = listener

    def now(self) -> datetime:
        """moto's `utcnow` (naive UTC) on this cloud's clock: for a request of the cloud's own
        that names the instant its act is modelled at, that instant (`modelled_time`)."""
        at_s = _SHARED.modelled(self)
        if at_s is None:
            return self._clock.now_datetime().replace(tzinfo=None)
        return datetime.fromtimestamp(at_s, tz=UTC).replace(tzinfo=None)

    def now_s(self) -> float:
        """`now` in unix seconds."""
        return self.now().replace(tzinfo=UTC).timestamp()

    def stamping(self) -> Callable[..., None]:
        """The botocore handler the cloud's own clients send modelled instants with."""
        return stamping(self.token)

    # ------------------------------------------------------------------ moto's state

    def endpoint(self, name: str) -> Any:
        """moto's own endpoint object: the control plane sets status and counts on it."""
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[self.account][REGION].endpoints[name]

    def hold_model_package(self, arn: str, image: str, digest: str) -> None:
        """Hold the model package `arn` names, as a subscription to its seller's makes it
        describable: one version in this account whose one container is `image` at `digest`,
        answering DescribeModelPackage for `arn` too (moto keys packages by its own ARNs)."""
        from moto.sagemaker.models import sagemaker_backends

        backend = sagemaker_backends[self.account][REGION]
        if arn in backend.model_package_name_mapping:
            return
        group = arn.rsplit("/", 2)[1]
        if group not in backend.model_package_groups:
            backend.create_model_package_group(group, "held by the local cloud")
        unset = dict.fromkeys(_PACKAGE_FIELDS_UNSET)
        created = backend.create_model_package(
            **unset,
            model_package_name=None,
            model_package_group_name=group,
            model_package_description="held by the local cloud",
            inference_specification={
                "Containers": [{"Image": image, "ImageDigest": digest}],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["application/jsonlines"],
            },
            certify_for_marketplace=False,
            model_approval_status="Approved",
        )
        backend.model_package_name_mapping[arn] = created

    def check_instance_count(self, count: int, what: str) -> None:
        """Refuse a count no endpoint of this cloud may have (moto's own error types)."""
        from moto.sagemaker.exceptions import SagemakerClientError, ValidationError

        class ResourceLimitExceeded(SagemakerClientError):
            code = "ResourceLimitExceeded"

        if count < 1:
            raise ValidationError(f"{what} {count}: an instance-based variant needs at least 1")
        limit = self.instance_limit
        if limit is not None and count > limit:
            raise ResourceLimitExceeded(
                f"{what} {count} is above this endpoint's instance limit of {limit} (the local "
                "cloud's emulated quota, at most the instances this machine is asked to run)"
            )

    def check_not_updating(self, endpoint: Any) -> None:
        """SageMaker's answer to a capacity change while an update is in progress."""
        from moto.sagemaker.exceptions import ValidationError

        if endpoint.endpoint_status in ("Updating", "Creating", "SystemUpdating"):
            raise ValidationError(f'Cannot update in-progress endpoint "{endpoint.arn}".')


# ---------------------------------------------------------------------- patches on moto


def _install_patches(shared: _SharedMoto) -> list[Callable[[], None]]:
    """Install the patches (see the module's docstring); returns how to undo each."""
    from moto.applicationautoscaling.models import ApplicationAutoscalingBackend
    from moto.cloudwatch.models import CloudWatchBackend
    from moto.core.common_models import BaseModel
    from moto.sagemaker.models import FakeEndpointConfig, SageMakerModelBackend
    from moto.sagemaker.responses import SageMakerResponse

    def untracked(cls: type, *args: Any, **kwargs: Any) -> Any:
        """moto keeps every model object it ever creates in a class list (`instances_tracked`)
        for its dashboard, which the local cloud does not serve: a datapoint, a log event or an
        alarm's history item rolled up or deleted stayed alive there, and a compressed cloud's
        RSS grew by its 5 datapoints every 10 s of its clock (docs/soak.md)."""
        return object.__new__(cls)

    def accept_any_instance_type(self: object, instance_type: str) -> None:
        """moto's list predates ml.g5.*; SageMaker validates types itself."""

    patches: list[tuple[Any, str, Any]] = [
        *_fronts(shared),
        (BaseModel, "__new__", staticmethod(untracked)),
        (FakeEndpointConfig, "validate_instance_type", accept_any_instance_type),
        (SageMakerModelBackend, "create_endpoint", _create_endpoint(shared)),
        (SageMakerResponse, "create_model", _create_model()),
        (
            SageMakerModelBackend,
            "update_endpoint_weights_and_capacities",
            _update_capacity(shared),
        ),
        (ApplicationAutoscalingBackend, "register_scalable_target", _register_target(shared)),
        (ApplicationAutoscalingBackend, "put_scaling_policy", _put_policy()),
        (CloudWatchBackend, "put_metric_data", _put_metric_data(shared)),
    ]
    restore: list[Callable[[], None]] = []
    for owner, name, replacement in patches:
        original = owner.__dict__.get(name)
        setattr(owner, name, replacement)
        if original is None:
            restore.append(lambda o=owner, n=name: delattr(o, n))
        else:
            restore.append(lambda o=owner, n=name, f=original: setattr(o, n, f))
    return restore


def _fronts(shared: _SharedMoto) -> list[tuple[Any, str, Any]]:
    """moto's Logs and CloudWatch on the serving cloud's clock; the two calls moto lacks,
    answered from that cloud's scaling history."""
    import moto.cloudwatch.models
    import moto.logs.models
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
    from moto.cloudwatch.responses import CloudWatchResponse
    from moto.core.responses import ActionResult

    def cloud_now() -> datetime:
        host = shared.serving()
        return host.now() if host else datetime.now(UTC).replace(tzinfo=None)

    def history(account: str) -> ScalingHistory:
        host = shared.host(account)
        return host.history if host else ScalingHistory()

    def describe_alarm_history(self: Any) -> Any:
        params = dict(self._get_params())
        for key in ("StartDate", "EndDate"):
            if isinstance(params.get(key), datetime) and params[key].tzinfo is None:
                params[key] = params[key].replace(tzinfo=UTC)
        return ActionResult(history(self.current_account).describe_alarm_history(params))

    def describe_scaling_activities(self: Any) -> str:
        params = json.loads(self.body or "{}")
        answer = history(self.current_account).describe_scaling_activities(params)
        return json.dumps(answer, default=lambda d: d.timestamp())

    activities = (ApplicationAutoScalingResponse, "describe_scaling_activities")
    return [
        (moto.logs.models, "utcnow", cloud_now),
        (moto.cloudwatch.models, "utcnow", cloud_now),
        (CloudWatchResponse, "describe_alarm_history", describe_alarm_history),
        (*activities, describe_scaling_activities),
    ]


def _put_metric_data(shared: _SharedMoto) -> Callable[..., Any]:
    """moto's put_metric_data, then the account's datapoints rolled up as CloudWatch's retention
    ages them (`metric_retention`), on the cloud's clock, at most once per `PASS_EVERY_S`."""
    from moto.cloudwatch.models import CloudWatchBackend

    original = CloudWatchBackend.put_metric_data
    lock = threading.Lock()  # a pass replaces the list: no put may append to the old one

    def put_metric_data(self: Any, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        with lock:
            original(self, namespace, metric_data)
            host = shared.host(self.account_id)
            if host is None:
                return
            now = host.now()
            last = getattr(self, "_tts_bench_rolled_at", None)
            if last is not None and (now - last).total_seconds() < PASS_EVERY_S:
                return
            self._tts_bench_rolled_at = now
            rolled = roll_up(self.metric_data, now)
            if rolled is not None:
                self.metric_data = rolled

    return put_metric_data


def _create_endpoint(shared: _SharedMoto) -> Callable[..., Any]:
    """moto's create_endpoint, then the account's listener told (the control plane starts it)."""
    from moto.sagemaker.models import SageMakerModelBackend

    original = SageMakerModelBackend.create_endpoint

    def create_endpoint(self: Any, endpoint_name: str, *args: Any, **kwargs: Any) -> Any:
        endpoint = original(self, endpoint_name, *args, **kwargs)
        host = shared.host(self.account_id)
        listener = host._listener if host else None
        if listener is not None:
            listener.endpoint_created(endpoint_name)
        return endpoint

    return create_endpoint


def _create_model() -> Callable[..., Any]:
    """moto's CreateModel, keeping the `EnableNetworkIsolation` it was given (moto drops it and
    answers false), so DescribeModel shows a package Model isolated as it was created."""
    from moto.sagemaker.responses import SageMakerResponse

    original = SageMakerResponse.create_model

    def create_model(self: Any) -> Any:
        answer = original(self)
        model = self.sagemaker_backend.describe_model(self._get_param("ModelName"))
        model.enable_network_isolation = bool(self._get_param("EnableNetworkIsolation", False))
        return answer

    return create_model


def _update_capacity(shared: _SharedMoto) -> Callable[..., Any]:
    """moto's capacity change, its counts checked first and handed to the account's listener
    after (moto's CurrentInstanceCount left as the fleet reports it)."""
    from moto.sagemaker.models import SageMakerModelBackend

    original = SageMakerModelBackend.update_endpoint_weights_and_capacities

    def update_capacity(
        self: Any, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
    ) -> str:
        host = shared.host(self.account_id)
        desired = {
            str(c["VariantName"]): int(c["DesiredInstanceCount"])
            for c in desired_weights_and_capacities
            if c.get("DesiredInstanceCount") is not None
        }
        for count in desired.values():
            if host is not None:
                host.check_instance_count(count, "DesiredInstanceCount")
        endpoint = self.endpoints.get(endpoint_name)
        if host is not None and host.refuse_while_updating and endpoint is not None:
            host.check_not_updating(endpoint)
        before = {
            v["VariantName"]: v.get("CurrentInstanceCount")
            for v in (endpoint.production_variants if endpoint else [])
        }
        arn = original(self, endpoint_name, desired_weights_and_capacities)
        for variant in self.endpoints[endpoint_name].production_variants:
            # moto jumps to the new count at once; the fleet reports the real one.
            if before.get(variant["VariantName"]) is not None:
                variant["CurrentInstanceCount"] = before[variant["VariantName"]]
        listener = host._listener if host else None
        if listener is not None and desired:
            listener.capacity_requested(endpoint_name, desired)
        return arn

    return update_capacity


def _register_target(shared: _SharedMoto) -> Callable[..., Any]:
    """moto's register_scalable_target, with a SageMaker variant's bounds checked first."""
    from moto.applicationautoscaling.exceptions import AWSValidationException
    from moto.applicationautoscaling.models import ApplicationAutoscalingBackend

    original = ApplicationAutoscalingBackend.register_scalable_target

    def register_scalable_target(
        self: Any,
        namespace: str,
        r_id: str,
        dimension: str,
        min_capacity: int | None,
        max_capacity: int | None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if namespace == "sagemaker":
            host = shared.host(self.account_id)
            existing = self.targets.get(dimension, {}).get(r_id)
            low = min_capacity if min_capacity is not None else existing_bound(existing, "min")
            high = max_capacity if max_capacity is not None else existing_bound(existing, "max")
            limit = host.machine_limit if host else MAX_LOCAL_INSTANCES
            problem = scalable_bounds_problem(low, high, limit)
            if problem is not None:
                raise AWSValidationException(problem)
        return original(
            self, namespace, r_id, dimension, min_capacity, max_capacity, *args, **kwargs
        )

    return register_scalable_target


def _put_policy() -> Callable[..., Any]:
    """moto's put_scaling_policy, refused as AWS refuses it when no scalable target is
    registered for it (`ObjectNotFoundException`): moto makes the policy anyway, and for some
    namespaces fails building its alarms."""
    from moto.applicationautoscaling.models import ApplicationAutoscalingBackend
    from moto.core.exceptions import JsonRESTError

    original = ApplicationAutoscalingBackend.put_scaling_policy

    def put_scaling_policy(
        self: Any,
        policy_name: str,
        service_namespace: str,
        resource_id: str,
        scalable_dimension: str,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if not self._scalable_target_exists(resource_id, scalable_dimension):
            raise JsonRESTError(
                "ObjectNotFoundException",
                f"No scalable target registered for service namespace: {service_namespace}, "
                f"resource ID: {resource_id}, scalable dimension: {scalable_dimension}",
            )
        return original(
            self, policy_name, service_namespace, resource_id, scalable_dimension, *args, **kwargs
        )

    return put_scaling_policy
