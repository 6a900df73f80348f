"""What the autoscaler did, as AWS reports it: alarm history and scaling activities.

moto 5.2.5 implements neither `DescribeAlarmHistory` nor `DescribeScalingActivities`, and its
alarms change state only when told. `ScalingHistory` is the backend the local cloud's autoscaler
writes to (every alarm state change it makes, every capacity it asks for) and the two API
answers are read from (`moto_host` fronts both operations with it). Timestamps are the cloud's
clock (virtual when compressed). An activity starts InProgress when the desired count is set and
becomes Successful at the first evaluation that finds the endpoint InService with that many
instances (so its EndTime is exact to one 10 s evaluation), or Overridden when a later decision
replaces it first.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from tts_bench.deployment import SCALABLE_DIMENSION, SERVICE_NAMESPACE

MAX_RECORDS: Final = 100  # both APIs' page size cap
HISTORY_LIMIT: Final = 10_000  # kept per kind, oldest dropped


@dataclass(frozen=True)
class AlarmTransition:
    alarm_name: str
    at_s: float
    old_state: str
    new_state: str
    reason: str


@dataclass(frozen=True)
class ScalingActivity:
    activity_id: str
    resource_id: str
    policy_name: str
    alarm_name: str
    from_capacity: int
    to_capacity: int
    started_s: float
    ended_s: float | None = None
    status: str = "InProgress"
    message: str = ""  # a failed activity's reason, as the service gave it


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _page(items: list[Any], params: dict[str, Any], key: str) -> dict[str, Any]:
    start = int(params.get("NextToken") or 0)
    size = min(
        int(params.get("MaxRecords") or params.get("MaxResults") or MAX_RECORDS), MAX_RECORDS
    )
    answer: dict[str, Any] = {key: items[start : start + size]}
    if start + size < len(items):
        answer["NextToken"] = str(start + size)
    return answer


class ScalingHistory:
    """Thread-safe: the autoscaler writes, the API answers read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._transitions: list[AlarmTransition] = []
        self._activities: list[ScalingActivity] = []

    # ------------------------------------------------------------------ writing

    def alarm_changed(self, name: str, at_s: float, old: str, new: str, reason: str) -> None:
        with self._lock:
            self._transitions.append(AlarmTransition(name, at_s, old, new, reason))
            del self._transitions[:-HISTORY_LIMIT]

    def capacity_set(
        self,
        resource_id: str,
        policy_name: str,
        alarm_name: str,
        from_capacity: int,
        to_capacity: int,
        at_s: float,
    ) -> None:
        with self._lock:
            self._activities = [
                replace(a, status="Overridden", ended_s=at_s) if a.status == "InProgress" else a
                for a in self._activities
            ]
            activity = ScalingActivity(
                str(uuid.uuid4()),
                resource_id,
                policy_name,
                alarm_name,
                from_capacity,
                to_capacity,
                at_s,
            )
            self._activities.append(activity)
            del self._activities[:-HISTORY_LIMIT]

    def capacity_failed(
        self,
        resource_id: str,
        policy_name: str,
        alarm_name: str,
        from_capacity: int,
        to_capacity: int,
        at_s: float,
        message: str,
    ) -> None:
        """A capacity change the endpoint refused: a Failed activity, ended when it started."""
        failed = ScalingActivity(
            str(uuid.uuid4()), resource_id, policy_name, alarm_name, from_capacity, to_capacity,
            at_s, at_s, "Failed", message,
        )  # fmt: skip
        with self._lock:
            self._activities.append(failed)
            del self._activities[:-HISTORY_LIMIT]

    def observe_endpoint(self, status: str, in_service: int, at_s: float) -> None:
        """The endpoint as an evaluation found it: settles the activity it completes."""
        with self._lock:
            self._activities = [
                replace(a, status="Successful", ended_s=at_s)
                if a.status == "InProgress"
                and status == "InService"
                and in_service == a.to_capacity
                else a
                for a in self._activities
            ]

    def transitions(self) -> list[AlarmTransition]:
        with self._lock:
            return list(self._transitions)

    def activities(self) -> list[ScalingActivity]:
        with self._lock:
            return list(self._activities)

    # ------------------------------------------------------------------ the API answers

    def describe_alarm_history(self, params: dict[str, Any]) -> dict[str, Any]:
        """`DescribeAlarmHistory`: state updates only (the only kind the autoscaler makes)."""
        kind = params.get("HistoryItemType")
        name = params.get("AlarmName")
        start, end = params.get("StartDate"), params.get("EndDate")
        items = [
            t
            for t in self.transitions()
            if (name is None or t.alarm_name == name)
            and kind in (None, "StateUpdate")
            and (start is None or _stamp(t.at_s) >= start)
            and (end is None or _stamp(t.at_s) <= end)
        ]
        items.sort(key=lambda t: t.at_s, reverse=params.get("ScanBy") != "TimestampAscending")
        return _page([_history_item(t) for t in items], params, "AlarmHistoryItems")

    def describe_scaling_activities(self, params: dict[str, Any]) -> dict[str, Any]:
        """`DescribeScalingActivities`, most recent first, as Application Auto Scaling answers."""
        if params.get("ServiceNamespace") != SERVICE_NAMESPACE:
            return {"ScalingActivities": []}
        resource = params.get("ResourceId")
        dimension = params.get("ScalableDimension")
        items = [
            a
            for a in self.activities()
            if (resource is None or a.resource_id == resource)
            and dimension in (None, SCALABLE_DIMENSION)
        ]
        items.sort(key=lambda a: a.started_s, reverse=True)
        return _page([_activity_item(a) for a in items], params, "ScalingActivities")


def _history_item(t: AlarmTransition) -> dict[str, Any]:
    data = {
        "version": "1.0",
        "oldState": {"stateValue": t.old_state},
        "newState": {"stateValue": t.new_state, "stateReason": t.reason},
    }
    return {
        "AlarmName": t.alarm_name,
        "AlarmType": "MetricAlarm",
        "Timestamp": _stamp(t.at_s),
        "HistoryItemType": "StateUpdate",
        "HistorySummary": f"Alarm updated from {t.old_state} to {t.new_state}",
        "HistoryData": json.dumps(data),
    }


def _activity_item(a: ScalingActivity) -> dict[str, Any]:
    item: dict[str, Any] = {
        "ActivityId": a.activity_id,
        "ServiceNamespace": SERVICE_NAMESPACE,
        "ResourceId": a.resource_id,
        "ScalableDimension": SCALABLE_DIMENSION,
        "Description": f"Setting desired instance count to {a.to_capacity}.",
        "Cause": (
            f"monitor alarm {a.alarm_name} in state ALARM triggered policy {a.policy_name}"
            if a.alarm_name
            else f"policy {a.policy_name}"
        ),
        "StartTime": _stamp(a.started_s),
        "StatusCode": a.status,
        "StatusMessage": (
            f"Failed to set desired instance count to {a.to_capacity}. Reason: {a.message}"
            if a.status == "Failed"
            else f"desired instance count {a.from_capacity} -> {a.to_capacity}"
        ),
    }
    if a.ended_s is not None:
        item["EndTime"] = _stamp(a.ended_s)
    return item
