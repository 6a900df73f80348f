"""Freeze an endpoint variant's scaling for a measurement, and restore it on every exit path.

Freezing suspends dynamic and scheduled scaling, pins the scalable target to min = max = 1 and
sets the variant's desired count to 1 (UpdateEndpointWeightsAndCapacities, bypassing the
policies). Before changing anything it writes the prior state to a local record file
(`FreezeRecords`: one JSON file per region/endpoint/variant under the state directory), so an
interrupted run can be undone later by `thaw`, even from another process.

`frozen_scaling` is the context manager a measurement wraps around its run: it restores the
recorded state on a normal end, on an exception, on SIGINT and on SIGTERM/SIGHUP (turned into
`Terminated`, a `SystemExit`, so `finally` blocks run), then removes the record. Signals that
arrive while restoring are held until the restore is done. `thaw` restores a record left
behind; with no record it un-suspends all scaling and leaves min/max as they are.

Scheduled actions due while the freeze held scheduled scaling suspended did not run, and AWS
does not run them on resume. So a restore puts back the min/max the target's schedule holds
now (each action due since the freeze run over the recorded bounds, `planning.aws.scheduled`),
not the recorded ones, and the desired count within them: otherwise a measurement over a
scheduled step would leave the target at the step before it until the next action.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, PositiveInt, ValidationError

from tts_bench.artifacts.files import write_atomically
from tts_bench.aws.clock import ServiceClock
from tts_bench.aws.deployed import SuspendedState, describe_endpoint
from tts_bench.aws.session import AwsSession, EndpointNotFoundError
from tts_bench.deployment import (
    DEFAULT_VARIANT,
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    resource_id,
)
from tts_bench.errors import RefusalError, TtsBenchError
from tts_bench.planning.aws.scheduled import ScheduledAction, UnsupportedSchedule, due, held_at

STATE_DIR_ENV: Final = "TTS_BENCH_STATE_DIR"
PINNED_INSTANCES: Final = 1
IN_SERVICE_TIMEOUT_S: Final = 30 * 60.0
IN_SERVICE_POLL_S: Final = 15.0

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class FreezeError(TtsBenchError):
    """Scaling could not be frozen or restored; the message says how to recover."""


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived while scaling was frozen. Exits 128 + signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def state_dir() -> Path:
    """Where tts-bench keeps local state: $TTS_BENCH_STATE_DIR, else the XDG state home."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tts-bench"


class FreezeRecord(BaseModel):
    """An endpoint variant's scaling state just before a freeze: what restore puts back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    endpoint: str
    variant: str
    # None: the variant had no scalable target, so only the desired count was changed.
    min_capacity: PositiveInt | None
    max_capacity: PositiveInt | None
    suspended: SuspendedState | None
    desired_instance_count: PositiveInt
    weight: float
    frozen_at: datetime
    pid: int
    host: str

    @property
    def resource_id(self) -> str:
        return resource_id(self.endpoint, self.variant)

    @property
    def had_target(self) -> bool:
        return self.min_capacity is not None

    def describe(self) -> str:
        scaling = (
            f"min {self.min_capacity}, max {self.max_capacity}, suspended "
            f"{self.suspended.describe() if self.suspended else 'nothing'}"
            if self.had_target
            else "no scalable target"
        )
        return f"desired {self.desired_instance_count}, {scaling}"


@dataclass(frozen=True)
class FreezeRecords:
    """The local record files, one per (region, endpoint, variant), written atomically."""

    directory: Path

    @classmethod
    def default(cls) -> FreezeRecords:
        return cls(state_dir() / "freeze")

    def path(self, region: str, endpoint: str, variant: str) -> Path:
        return self.directory / f"{region}--{endpoint}--{variant}.json"

    def load(self, region: str, endpoint: str, variant: str) -> FreezeRecord | None:
        path = self.path(region, endpoint, variant)
        try:
            return FreezeRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FreezeError(
                f"cannot read the freeze record {path} ({exc.strerror}); set {STATE_DIR_ENV} "
                "to a writable directory"
            ) from None
        except (ValueError, ValidationError) as exc:
            raise FreezeError(
                f"{path}: unreadable freeze record ({type(exc).__name__}); fix or move it aside, "
                "then run `tts-bench thaw` again (without a record it un-suspends scaling)"
            ) from None

    def save(self, record: FreezeRecord) -> Path:
        path = self.path(record.region, record.endpoint, record.variant)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, (record.model_dump_json(indent=2) + "\n").encode("utf-8"))
        except OSError as exc:
            raise FreezeError(
                f"cannot write the freeze record {path} ({exc.strerror}); set {STATE_DIR_ENV} "
                "to a writable directory"
            ) from None
        return path

    def remove(self, record: FreezeRecord) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(record.region, record.endpoint, record.variant).unlink()


# --------------------------------------------------------------------------- AWS edge


def _describe_target(session: AwsSession, rid: str) -> dict[str, Any] | None:
    targets = session.call(
        "application-autoscaling",
        "describe_scalable_targets",
        resource=f"scalable target {rid}",
        ServiceNamespace=SERVICE_NAMESPACE,
        ResourceIds=[rid],
        ScalableDimension=SCALABLE_DIMENSION,
    ).get("ScalableTargets", [])
    return targets[0] if targets else None


def _register(session: AwsSession, rid: str, **settings: Any) -> None:
    session.call(
        "application-autoscaling",
        "register_scalable_target",
        resource=f"scalable target {rid}",
        ServiceNamespace=SERVICE_NAMESPACE,
        ResourceId=rid,
        ScalableDimension=SCALABLE_DIMENSION,
        **settings,
    )


def _variant(session: AwsSession, endpoint: str, variant: str) -> tuple[str, dict[str, Any]]:
    described = describe_endpoint(session, endpoint)
    for entry in described.get("ProductionVariants", []):
        if entry["VariantName"] == variant:
            return str(described.get("EndpointStatus", "Unknown")), entry
    raise FreezeError(
        f"endpoint {endpoint} has no variant {variant!r}; pass --variant with one of "
        f"{[v['VariantName'] for v in described.get('ProductionVariants', [])]}"
    )


def _wait_in_service(session: AwsSession, endpoint: str, timeout_s: float, log: Log) -> None:
    """Wait while the endpoint is Updating: SageMaker refuses capacity changes until then."""
    deadline = time.monotonic() + timeout_s
    polls = 0
    while True:
        status = str(describe_endpoint(session, endpoint).get("EndpointStatus", "Unknown"))
        if status == "InService":
            return
        if status not in ("Updating", "Creating", "SystemUpdating"):
            raise FreezeError(
                f"endpoint {endpoint} is {status}, not InService; fix the endpoint first"
            )
        if time.monotonic() >= deadline:
            raise FreezeError(
                f"endpoint {endpoint} still {status} after {timeout_s:.0f} s; wait for it and run "
                f"`tts-bench thaw --endpoint {endpoint}`"
            )
        log(f"waiting for endpoint {endpoint} to be InService (now {status})")
        # Quick at first (a drain or a local endpoint takes seconds), then every 15 s.
        time.sleep(min(IN_SERVICE_POLL_S, 2.0**polls))
        polls += 1


def _set_desired(
    session: AwsSession, endpoint: str, variant: str, count: int, weight: float, log: Log
) -> None:
    _wait_in_service(session, endpoint, IN_SERVICE_TIMEOUT_S, log)
    _, live = _variant(session, endpoint, variant)
    if live.get("DesiredInstanceCount") == count:
        return
    session.call(
        "sagemaker",
        "update_endpoint_weights_and_capacities",
        resource=f"variant {variant} of endpoint {endpoint}",
        EndpointName=endpoint,
        DesiredWeightsAndCapacities=[
            {"VariantName": variant, "DesiredInstanceCount": count, "DesiredWeight": weight}
        ],
    )
    _wait_in_service(session, endpoint, IN_SERVICE_TIMEOUT_S, log)


def read_prior_state(session: AwsSession, endpoint: str, variant: str) -> FreezeRecord:
    _, live = _variant(session, endpoint, variant)
    target = _describe_target(session, resource_id(endpoint, variant))
    weight = live.get("CurrentWeight", live.get("DesiredWeight"))
    return FreezeRecord(
        region=session.region,
        endpoint=endpoint,
        variant=variant,
        min_capacity=target["MinCapacity"] if target else None,
        max_capacity=target["MaxCapacity"] if target else None,
        suspended=SuspendedState.from_api(target.get("SuspendedState")) if target else None,
        desired_instance_count=live.get("DesiredInstanceCount") or live["CurrentInstanceCount"],
        weight=float(weight) if weight is not None else 1.0,
        frozen_at=datetime.now(UTC).replace(microsecond=0),
        pid=os.getpid(),
        host=socket.gethostname(),
    )


def apply_freeze(session: AwsSession, record: FreezeRecord, log: Log = _stderr) -> None:
    """Suspend all scaling, pin min = max = 1, and set the desired count to 1."""
    if record.had_target:
        _register(
            session,
            record.resource_id,
            MinCapacity=PINNED_INSTANCES,
            MaxCapacity=PINNED_INSTANCES,
            SuspendedState=SuspendedState.all(True).to_api(),
        )
    _set_desired(session, record.endpoint, record.variant, PINNED_INSTANCES, record.weight, log)


def _scheduled_actions(session: AwsSession, rid: str) -> list[ScheduledAction]:
    return [
        ScheduledAction(
            a["ScheduledActionName"],
            a["Schedule"],
            a.get("Timezone") or "UTC",
            (a.get("ScalableTargetAction") or {}).get("MinCapacity"),
            (a.get("ScalableTargetAction") or {}).get("MaxCapacity"),
        )
        for a in session.paginate(
            "application-autoscaling",
            "describe_scheduled_actions",
            "ScheduledActions",
            resource=f"scheduled actions of {rid}",
            ServiceNamespace=SERVICE_NAMESPACE,
            ResourceId=rid,
            ScalableDimension=SCALABLE_DIMENSION,
        )
    ]


def bounds_to_restore(
    session: AwsSession, record: FreezeRecord, low: int, high: int, log: Log
) -> tuple[int, int]:
    """The recorded min/max (`low`, `high`), moved by every scheduled action the freeze kept
    from running."""
    recorded = (low, high)
    if record.suspended is None or record.suspended.scheduled:
        return recorded  # suspended before the freeze: the freeze kept nothing from running
    clock = ServiceClock.from_environment()  # the local cloud's actions run on its clock
    since_s, now_s = clock.to_virtual(record.frozen_at.timestamp()), clock.now()
    actions = _scheduled_actions(session, record.resource_id)
    try:
        missed = due(actions, since_s, now_s)
        bounds = held_at(actions, *recorded, since_s, now_s)
    except UnsupportedSchedule as exc:
        log(f"{exc}; restoring the recorded min/max, the next scheduled action moves them")
        return recorded
    if missed:
        names = ", ".join(dict.fromkeys(a.name for _, a in missed))
        log(f"scheduled actions due while frozen did not run ({names}): restoring min/max {bounds}")
    return bounds


def restore(
    session: AwsSession, record: FreezeRecord, records: FreezeRecords, log: Log = _stderr
) -> None:
    """Put back the recorded state (still suspended while the count moves), then drop the
    record; min/max and the count as the target's schedule holds them now."""
    target = _describe_target(session, record.resource_id) if record.had_target else None
    if record.had_target and target is None:
        log(f"scalable target {record.resource_id} no longer exists; not re-creating it")
    desired = record.desired_instance_count
    if target is not None and record.min_capacity and record.max_capacity:
        low, high = bounds_to_restore(
            session, record, record.min_capacity, record.max_capacity, log
        )
        _register(session, record.resource_id, MinCapacity=low, MaxCapacity=high)
        desired = min(max(desired, low), high)
    _set_desired(session, record.endpoint, record.variant, desired, record.weight, log)
    if target is not None and record.suspended is not None:
        _register(session, record.resource_id, SuspendedState=record.suspended.to_api())
    records.remove(record)


# --------------------------------------------------------------------------- signals


@contextlib.contextmanager
def _signals_as_exceptions() -> Iterator[None]:
    """SIGINT → KeyboardInterrupt, SIGTERM/SIGHUP → Terminated, so the caller's cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the caller must arrange its own
        return

    def terminate(signum: int, _frame: FrameType | None) -> None:
        raise Terminated(signum)

    handlers = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGTERM: terminate,
        signal.SIGHUP: terminate,
    }
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _signals_held(log: Log) -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM/SIGHUP while restoring; the caller acts on them afterwards."""
    pending: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return

    def hold(signum: int, _frame: FrameType | None) -> None:
        pending.append(signum)
        log(f"{signal.Signals(signum).name} received: restoring scaling first")

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, hold) for sig in sigs}
    try:
        yield pending
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _signal_exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _restore_or_explain(
    session: AwsSession, record: FreezeRecord, records: FreezeRecords, log: Log
) -> list[int]:
    with _signals_held(log) as pending:
        try:
            restore(session, record, records, log)
        except TtsBenchError as exc:
            raise FreezeError(
                f"could not restore the scaling of {record.resource_id} ({exc}); the prior state "
                f"stays recorded in {records.path(record.region, record.endpoint, record.variant)}"
                f"; run `tts-bench thaw --endpoint {record.endpoint}`"
            ) from None
    log(f"scaling of {record.resource_id} restored: {record.describe()}")
    return pending


@contextlib.contextmanager
def frozen_scaling(
    session: AwsSession,
    endpoint: str,
    variant: str = DEFAULT_VARIANT,
    *,
    records: FreezeRecords | None = None,
    log: Log = _stderr,
) -> Iterator[FreezeRecord]:
    """Freeze the variant's scaling for the block and restore it however the block ends.

    Refuses when a record of an earlier, unrestored freeze exists (its state is the true prior
    state; recording the frozen one over it would lose it): run `tts-bench thaw` first.
    """
    records = records or FreezeRecords.default()
    with _signals_as_exceptions():
        earlier = records.load(session.region, endpoint, variant)
        if earlier is not None:
            raise RefusalError(
                f"scaling of {earlier.resource_id} is still frozen by a run of "
                f"{earlier.frozen_at:%Y-%m-%d %H:%M:%S} UTC (pid {earlier.pid} on {earlier.host}); "
                f"run `tts-bench thaw --endpoint {endpoint}` first"
            )
        record = read_prior_state(session, endpoint, variant)
        try:
            path = records.save(record)  # before any change, so every later failure is undone
            log(f"freezing scaling of {record.resource_id} (was: {record.describe()}; {path})")
            apply_freeze(session, record, log)
            yield record
        except BaseException:
            _restore_or_explain(session, record, records, log)
            raise
        pending = _restore_or_explain(session, record, records, log)
        if pending:
            raise _signal_exception(pending[0])


# --------------------------------------------------------------------------- thaw


@dataclass(frozen=True)
class ThawResult:
    record: FreezeRecord | None  # what was restored; None when no record was found
    suspended_after: SuspendedState | None  # None: the variant has no scalable target
    min_capacity: int | None
    max_capacity: int | None

    @property
    def suspended(self) -> bool:
        return self.suspended_after is not None and self.suspended_after.any


def thaw(
    session: AwsSession,
    endpoint: str,
    variant: str = DEFAULT_VARIANT,
    *,
    records: FreezeRecords | None = None,
    log: Log = _stderr,
) -> ThawResult:
    """Restore a recorded freeze; with no record, un-suspend all scaling. Safe to repeat."""
    records = records or FreezeRecords.default()
    rid = resource_id(endpoint, variant)
    record = records.load(session.region, endpoint, variant)
    if record is not None:
        log(f"restoring {rid} from the freeze of {record.frozen_at:%Y-%m-%d %H:%M:%S} UTC")
        try:
            restore(session, record, records, log)
        except EndpointNotFoundError:
            path = records.path(record.region, endpoint, variant)
            records.remove(record)
            raise FreezeError(
                f"endpoint {endpoint} no longer exists in {session.region}, so there is nothing "
                f"to restore; removed its freeze record {path}"
            ) from None
    else:
        describe_endpoint(session, endpoint)  # a missing endpoint is an error, not "nothing to do"
        target = _describe_target(session, rid)
        if target is not None and SuspendedState.from_api(target.get("SuspendedState")).any:
            log(f"no freeze record for {rid}; un-suspending its scaling, min/max left as they are")
            _register(session, rid, SuspendedState=SuspendedState.all(False).to_api())
    after = _describe_target(session, rid)
    return ThawResult(
        record=record,
        suspended_after=SuspendedState.from_api(after.get("SuspendedState")) if after else None,
        min_capacity=after["MinCapacity"] if after else None,
        max_capacity=after["MaxCapacity"] if after else None,
    )
