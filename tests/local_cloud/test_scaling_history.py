"""The autoscaler's history as DescribeAlarmHistory and DescribeScalingActivities answer it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tts_bench.local_cloud.cloudwatch.scaling_history import ScalingHistory

RESOURCE = "endpoint/e/variant/AllTraffic"


@pytest.fixture
def history() -> ScalingHistory:
    h = ScalingHistory()
    h.alarm_changed("high", 100.0, "INSUFFICIENT_DATA", "OK", "datapoints [1.0]")
    h.alarm_changed("low", 100.0, "INSUFFICIENT_DATA", "ALARM", "datapoints [0.0]")
    h.alarm_changed("high", 130.0, "OK", "ALARM", "datapoints [40.0, 41.0, 42.0]")
    return h


def test_alarm_history_is_newest_first_and_filters_by_alarm_and_time(
    history: ScalingHistory,
) -> None:
    items = history.describe_alarm_history({})["AlarmHistoryItems"]
    assert [(i["AlarmName"], i["HistorySummary"]) for i in items] == [
        ("high", "Alarm updated from OK to ALARM"),
        ("high", "Alarm updated from INSUFFICIENT_DATA to OK"),
        ("low", "Alarm updated from INSUFFICIENT_DATA to ALARM"),
    ]
    assert items[0]["Timestamp"] == datetime.fromtimestamp(130.0, tz=UTC)
    data = json.loads(items[0]["HistoryData"])
    assert (data["oldState"]["stateValue"], data["newState"]["stateValue"]) == ("OK", "ALARM")
    only = history.describe_alarm_history(
        {
            "AlarmName": "high",
            "ScanBy": "TimestampAscending",
            "StartDate": datetime.fromtimestamp(120, UTC),
        }
    )["AlarmHistoryItems"]
    assert [i["Timestamp"].timestamp() for i in only] == [130.0]
    assert history.describe_alarm_history({"HistoryItemType": "Action"})["AlarmHistoryItems"] == []


def test_alarm_history_pages() -> None:
    h = ScalingHistory()
    for t in range(5):
        h.alarm_changed("a", float(t), "OK", "ALARM", "")
    first = h.describe_alarm_history({"MaxRecords": 2, "ScanBy": "TimestampAscending"})
    second = h.describe_alarm_history(
        {"MaxRecords": 2, "ScanBy": "TimestampAscending", "NextToken": first["NextToken"]}
    )
    stamps = [i["Timestamp"].timestamp() for i in first["AlarmHistoryItems"]]
    stamps += [i["Timestamp"].timestamp() for i in second["AlarmHistoryItems"]]
    assert stamps == [0.0, 1.0, 2.0, 3.0]


def test_an_activity_settles_when_the_endpoint_serves_its_count_or_is_overridden() -> None:
    h = ScalingHistory()
    h.capacity_set(RESOURCE, "target", "high", 1, 2, 100.0)
    h.observe_endpoint("Updating", 1, 110.0)  # still starting
    h.capacity_set(RESOURCE, "target", "high", 2, 3, 120.0)  # replaces it
    h.observe_endpoint("InService", 3, 150.0)
    answer = h.describe_scaling_activities(
        {"ServiceNamespace": "sagemaker", "ResourceId": RESOURCE}
    )
    newest, oldest = answer["ScalingActivities"]
    assert (newest["StatusCode"], newest["EndTime"].timestamp()) == ("Successful", 150.0)
    assert (oldest["StatusCode"], oldest["EndTime"].timestamp()) == ("Overridden", 120.0)
    assert newest["Description"] == "Setting desired instance count to 3."
    assert newest["Cause"] == "monitor alarm high in state ALARM triggered policy target"
    assert newest["StartTime"] == datetime.fromtimestamp(120.0, tz=UTC)
    other = {"ServiceNamespace": "ecs"}
    assert h.describe_scaling_activities(other)["ScalingActivities"] == []
