"""An organic ttotal's measured detection lag: recorded with the deploy shape it was measured
under, and used by `plan` only for a plan of that structure whose target tracking acted.

The organic artifacts here are the reference ttotal with detection stages put before its
`desired_set`, as `ttotal --trigger organic` writes them."""

from __future__ import annotations

import functools
import math

import pytest
from pydantic import ValidationError

from tests.conftest import REFERENCE_QMAX, REFERENCE_TTOTAL
from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.plan import SourceArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import Detection, Stage, Trigger, TtotalArtifact
from tts_bench.measure.ttotal.organic import first_breach
from tts_bench.measure.ttotal.probe import TtotalError
from tts_bench.measure.ttotal.stages import timed_stages
from tts_bench.planning.aws.scaling import AlarmRule, Datapoint
from tts_bench.planning.deploy import deploy_shape_of, detection_shape
from tts_bench.planning.fleet_rule import tracking_lag_s
from tts_bench.planning.plan import PlanRequest, derive_plan

QMAX = load_artifact(REFERENCE_QMAX, QmaxArtifact)
FORCED = load_artifact(REFERENCE_TTOTAL, TtotalArtifact)
SOURCES = {
    "qmax": SourceArtifact(
        path="q.json", sha256=sha256_file(REFERENCE_QMAX), provenance="reference"
    ),
    "ttotal": SourceArtifact(path="t.json", sha256="0" * 64, provenance="reference"),
}


def plan_of(ttotal: TtotalArtifact, rule: str) -> object:
    request = PlanRequest(peak_rps=5000, trough_rps=10, rule=rule)  # type: ignore[arg-type]
    return derive_plan(QMAX, ttotal, request, SOURCES)


@functools.cache
def forced_plan(rule: str) -> object:
    return plan_of(FORCED, rule)


def shape_of(rule: str) -> str:
    return detection_shape(deploy_shape_of(forced_plan(rule)))  # type: ignore[arg-type]


def organic(lag_s: float, role: str, shape: str) -> TtotalArtifact:
    """The reference scale-out, detected organically in `lag_s` by the policy of `role`."""
    detection = [
        Stage(
            name="load_crossed -> first_datapoint_over",
            seconds=round(lag_s - 5, 3),
            measured=True,
            counted=False,
        ),
        Stage(
            name="first_datapoint_over -> desired_set", seconds=5.0, measured=True, counted=False
        ),
    ]
    stages = [
        Stage(name="load_applied -> load_crossed", seconds=30.0, measured=True, counted=False),
        *detection,
        *(s for s in FORCED.stages if s.counted),
    ]
    return FORCED.model_copy(
        update={
            "trigger": Trigger.ORGANIC,
            "stages": stages,
            "detection": Detection(
                lag_s=lag_s,
                modelled_s=240.0,
                policy_role=role,
                alarm="AlarmHigh",
                deploy_shape=shape,
                plan_id="0123456789ab",
                load_factor=1.1,
            ),
        }
    )


def lag_finding(plan: object) -> object:
    return plan.finding("detection_lag")  # type: ignore[attr-defined]


def test_a_force_desired_ttotal_plans_with_the_bound_and_says_nothing_of_a_lag() -> None:
    for rule in ("published", "fleet"):
        assert lag_finding(forced_plan(rule)) is None


def test_the_fleet_rule_uses_a_lag_its_target_tracking_showed_under_its_shape() -> None:
    plan = plan_of(organic(247.5, "invocations-target", shape_of("fleet")), "fleet")
    found = lag_finding(plan)
    assert found.verdict.value == "ok" and found.figure("used") is True
    assert plan.fleet.detection_lag_s == 247.5  # type: ignore[attr-defined]
    assert plan.fleet.planned_total_s == pytest.approx(260.2 + 247.5)  # type: ignore[attr-defined]
    assert plan.scale_out_cooldown_s == math.ceil(260.2 + 247.5)  # type: ignore[attr-defined]
    assert plan.inputs.planned_total_s == pytest.approx(260.2 + 247.5)  # type: ignore[attr-defined]
    assert found.figure("bound_s") == tracking_lag_s() == 240


def test_the_published_rule_uses_a_measured_lag_in_place_of_the_bound() -> None:
    plan = plan_of(organic(33.0, "concurrency-target", shape_of("published")), "published")
    assert lag_finding(plan).verdict.value == "ok"
    assert plan.inputs.planned_total_s == pytest.approx(260.2 + 33.0)  # type: ignore[attr-defined]
    assert plan.scale_in_cooldown_s == math.floor(3 * (260.2 + 33.0))  # type: ignore[attr-defined]
    forced = forced_plan("published")
    assert forced.inputs.planned_total_s == 320.2  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("rule", "role", "shape_rule", "why"),
    [
        ("fleet", "concurrency-target", "published", "another deploy shape"),
        ("published", "invocations-target", "fleet", "another deploy shape"),
        ("fleet", "burst", "fleet", "came from the burst policy"),
    ],
)
def test_a_lag_measured_under_another_shape_or_policy_leaves_the_bound_with_a_warning(
    rule: str, role: str, shape_rule: str, why: str
) -> None:
    plan = plan_of(organic(31.0, role, shape_of(shape_rule)), rule)
    found = lag_finding(plan)
    assert found.verdict.value == "warn" and found.figure("used") is False and why in found.message
    bound = forced_plan(rule)
    assert plan.inputs.planned_total_s == bound.inputs.planned_total_s  # type: ignore[attr-defined]
    assert plan.scale_out_cooldown_s == bound.scale_out_cooldown_s  # type: ignore[attr-defined]


def test_the_shape_is_structure_the_measured_numbers_do_not_change() -> None:
    """Re-deriving with a lag changes cooldowns and the planned total, never the structure."""
    with_lag = plan_of(organic(300.0, "invocations-target", shape_of("fleet")), "fleet")
    assert detection_shape(with_lag.deploy) == shape_of("fleet")  # type: ignore[attr-defined]
    assert shape_of("fleet") != shape_of("published")
    assert "InvocationsPerInstance Sum 60 s, 3 of 3" in shape_of("fleet")


def test_only_an_organic_ttotal_records_a_detection() -> None:
    detection = organic(240.0, "invocations-target", "x").detection
    with pytest.raises(ValidationError, match="an organic ttotal records its detection"):
        TtotalArtifact.model_validate(
            {**FORCED.model_dump(), "detection": detection.model_dump()}  # type: ignore[union-attr]
        )
    with pytest.raises(ValidationError, match="an organic ttotal records its detection"):
        TtotalArtifact.model_validate({**FORCED.model_dump(), "trigger": "organic"})
    assert FORCED.detection is None  # an artifact written before the field loads as before


def test_detection_stages_before_desired_set_are_recorded_not_counted() -> None:
    points = [
        ("load_crossed", 100.0),
        ("alarm", 345.0),
        ("desired_set", 346.0),
        ("in_service", 560.0),
    ]
    stages = timed_stages(70.0, points, 1.0, counted_from="desired_set")
    assert [(s.name, s.seconds, s.counted) for s in stages] == [
        ("load_applied -> load_crossed", 30.0, False),
        ("load_crossed -> alarm", 245.0, False),
        ("alarm -> desired_set", 1.0, False),
        ("desired_set -> in_service", 214.0, True),
    ]
    # A hand-edited artifact naming no point is refused in one line, not a ValueError.
    with pytest.raises(TtotalError, match="counted_from 'x' names no point"):
        timed_stages(70.0, points, 1.0, counted_from="x")


BURST = AlarmRule(
    name="burst-concurrency", metric="ConcurrentRequestsPerModel", statistic="Maximum",
    period_s=10, evaluation_periods=1, datapoints_to_alarm=1, threshold=3.61,
    comparison="GreaterThanOrEqualToThreshold", treat_missing="notBreaching",
)  # fmt: skip


def test_the_first_datapoint_over_is_the_first_complete_one_after_the_crossing() -> None:
    points = [Datapoint(0.0, 1.0), Datapoint(10.0, 2.0), Datapoint(20.0, 5.0), Datapoint(30.0, 6)]
    # Crossed at 14 s: the period [10, 20) ends after it but stayed under; [20, 30) is over.
    assert first_breach(points, BURST, crossed=14.0, in_alarm=35.0) == 30.0


def test_an_alarm_that_acted_on_a_datapoint_before_the_crossing_is_named_not_a_clock_skew() -> None:
    """A lone instance's 10 s Maximum over the burst's level at the warm-up load fires the alarm
    5 s after that period; the probe's own count crosses later, inside the next period."""
    points = [Datapoint(0.0, 4.0), Datapoint(10.0, 5.0)]
    with pytest.raises(TtotalError, match=r"acted on an earlier datapoint.*--min-instances 3"):
        first_breach(points, BURST, crossed=12.0, in_alarm=15.0)
