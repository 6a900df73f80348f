"""Reading a rehearsal's scaling activities back: a refused capacity change changed nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tts_bench.aws.scaling_record import Watched, read_activities


class Activities:
    """The one call `read_activities` makes, answered from a list (the API's page)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def paginate(self, service: str, operation: str, key: str, **_: Any) -> list[dict[str, Any]]:
        assert (service, operation, key) == (
            "application-autoscaling", "describe_scaling_activities", "ScalingActivities",
        )  # fmt: skip
        return self.items


def _activity(at_s: float, status: str, to: int) -> dict[str, Any]:
    return {
        "StartTime": datetime.fromtimestamp(at_s, tz=UTC),
        "StatusCode": status,
        "Description": f"Setting desired instance count to {to}.",
        "Cause": "monitor alarm a in state ALARM triggered policy p",
        "StatusMessage": f"desired instance count 1 -> {to}"
        if status != "Failed"
        else f"Failed to set desired instance count to {to}. Reason: ValidationException: "
        'Cannot update in-progress endpoint "arn".',
    }


def test_a_failed_activity_is_not_read_as_a_scaling_action() -> None:
    session = Activities(
        [_activity(100.0, "Successful", 4), _activity(160.0, "Failed", 7),
         _activity(400.0, "InProgress", 9)]
    )  # fmt: skip
    watched = Watched("e", "AllTraffic", ())
    found = read_activities(session, watched, 0.0, 1000.0)  # type: ignore[arg-type]
    assert [(a.t_s, a.after, a.status) for a in found] == [
        (100.0, 4, "Successful"),
        (400.0, 9, "InProgress"),
    ]
