"""The chain's pure rules on SageMaker: recovery, scale-out stages, the CloudWatch join, quota."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rungs import LadderSettings
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import RefusalError
from tts_bench.measure.ladder.live.cloudwatch_join import MetricPoint, ratios_for, window_mean
from tts_bench.measure.samples import Outcome
from tts_bench.measure.transport.response_stream import StreamEventError, failure_of, payload_lines
from tts_bench.measure.ttotal.probe import ProbeSample
from tts_bench.measure.ttotal.quota import QuotaCheck
from tts_bench.measure.ttotal.recovery import recovery_baseline, recovery_time
from tts_bench.measure.ttotal.sagemaker import EMULATED_PROVISIONING, scale_out_events
from tts_bench.measure.ttotal.stages import stages_from_events


def steady(start: float, end: float, ttfab_ms: float, every_s: float = 0.5) -> list[ProbeSample]:
    count = int((end - start) / every_s)
    return [ProbeSample(start + i * every_s, ttfab_ms) for i in range(count)]


def test_recovery_is_the_first_end_that_stays_within_the_bound_for_the_hold() -> None:
    samples = steady(0, 30, 900) + steady(30, 100, 300)
    # The rolling 10 s window still holds slow requests until ~40 s.
    recovered = recovery_time(samples, since=20, bound_ms=400, hold_s=20, now=100)
    assert recovered is not None and 35 < recovered <= 40.5
    assert recovery_time(samples, since=20, bound_ms=400, hold_s=20, now=recovered + 19) is None
    assert recovery_time(samples, since=20, bound_ms=200, hold_s=20, now=100) is None


def test_a_relapse_restarts_the_hold_and_failures_never_count_as_recovered() -> None:
    relapse = steady(0, 20, 300) + steady(20, 22, 900) + steady(22, 80, 300)
    assert recovery_time(relapse, since=0, bound_ms=400, hold_s=25, now=80) >= 30
    failures = [ProbeSample(s.end, None) for s in steady(0, 60, 300)]
    assert recovery_time(failures, since=0, bound_ms=400, hold_s=10, now=60) is None


# The probe at 2 users on one server with the shipped corpus, as the main job's T_total holds it:
# a phase at load ~4 (the ladder's hour) and one beside two CPU burners (a busier hour), recorded
# by benchmarks/recovery_baseline_probe.py on this 2-core machine.
RECORDED_PROBE = Path(__file__).resolve().parent / "recorded" / "recovery-probe.json"
MAIN_JOB_FACTOR, MAIN_JOB_HOLD_S = 1.5, 15.0  # jobs/local_cloud_run.py's CLOUD_RECOVERY_*


def recorded(phase: str) -> list[ProbeSample]:
    rows = json.loads(RECORDED_PROBE.read_text())[phase]
    return sorted(
        (ProbeSample(r["end"], r["ttfab_ms"], None, r["start"]) for r in rows), key=lambda s: s.end
    )


def busy_hour() -> tuple[float, list[ProbeSample], list[ProbeSample]]:
    """The busy phase split where the scale-out is forced, at the 16th request's end (its load
    had risen further by then: the burners beside the other sessions' work); the baseline is the
    6 requests that ended last before it, as many as the job waits for."""
    busy = recorded("busy")
    desired_set = busy[15].end
    return desired_set, busy[10:16], busy[16:]


def test_a_probe_slowed_by_the_machine_recovers_against_the_p95_it_had_just_before() -> None:
    ladder_p95 = float(np.percentile([s.ttfab_ms for s in recorded("quiet")], 95))
    desired_set, before, after = busy_hour()
    now = after[-1].end
    # Judged against the ladder's hour, as before: the main job's failure (no recovery at all).
    old = MAIN_JOB_FACTOR * ladder_p95
    assert recovery_time(after, desired_set, old, MAIN_JOB_HOLD_S, now) is None
    baseline = recovery_baseline(ladder_p95, MAIN_JOB_FACTOR, before)
    assert baseline.remeasured_p95_ms is not None and baseline.remeasured_p95_ms > ladder_p95
    assert baseline.remeasured_requests == 6 and baseline.why_not_remeasured is None
    assert baseline.bound_ms == pytest.approx(MAIN_JOB_FACTOR * baseline.remeasured_p95_ms)
    assert recovery_time(after, desired_set, baseline.bound_ms, MAIN_JOB_HOLD_S, now) is not None


def test_a_broken_recovery_still_fails_against_the_remeasured_baseline() -> None:
    desired_set, before, after = busy_hour()
    now = after[-1].end
    baseline = recovery_baseline(1000.0, MAIN_JOB_FACTOR, before)
    # Slower after the scale-out than the bound allows, at every request: never recovered.
    slower = [ProbeSample(s.end, baseline.bound_ms * 1.01, None, s.start) for s in after]
    assert recovery_time(slower, desired_set, baseline.bound_ms, MAIN_JOB_HOLD_S, now) is None
    # The new instance failing requests: never recovered, however wide the bound.
    failing = [ProbeSample(s.end, None, None, s.start, "ModelError") for s in after]
    assert recovery_time(failing, desired_set, baseline.bound_ms, MAIN_JOB_HOLD_S, now) is None


def test_a_baseline_from_failing_or_too_few_requests_is_the_ladders_alone() -> None:
    _, before, _ = busy_hour()
    failed = [*before[:-1], ProbeSample(before[-1].end, None, None, before[-1].start, "503")]
    for requests, why in ((failed, "1 of 6 probe requests failed"), (before[:5], "fewer than 6")):
        baseline = recovery_baseline(800.0, 1.5, requests)
        assert baseline.remeasured_p95_ms is None and why in (baseline.why_not_remeasured or "")
        assert baseline.bound_ms == pytest.approx(1200.0)
    # A quieter machine than the ladder's never tightens the bound below the ladder's.
    quick = [ProbeSample(s.end, 100.0, None, s.start) for s in before]
    assert recovery_baseline(800.0, 1.5, quick).bound_ms == pytest.approx(1200.0)
    # Another load than the bound rung's on one instance is no re-measurement at all.
    other = recovery_baseline(800.0, 1.5, before, "the probe holds 10 users, the bound rung 5")
    assert other.remeasured_p95_ms is None and other.bound_ms == pytest.approx(1200.0)


@given(st.lists(st.floats(0.5, 30), min_size=6, max_size=6))
def test_stages_run_in_order_and_sum_to_the_total(gaps: list[float]) -> None:
    t = [1000.0]
    for gap in gaps:
        t.append(t[-1] + gap)
    markers = {"container_started": t[2], "framework_init": t[2] + 0.1, "weights_ready": t[3]}
    markers["warmup_done"] = t[4]
    events = scale_out_events(t[0] - 5, t[0], t[1], markers, t[5], t[6], emulated=True)
    stages = stages_from_events(events)
    names = [s.name for s in stages]
    assert names[0] == "load_applied -> desired_set" and not stages[0].counted
    assert names[1:3] == [
        "desired_set -> instance_visible",
        "instance_visible -> container_started",
    ]
    assert names[-2:] == ["warmup_done -> in_service", "in_service -> traffic_recovered"]
    assert stages[1].reason == EMULATED_PROVISIONING and all(s.reason is None for s in stages[2:])
    counted = round(sum(s.seconds for s in stages if s.counted), 3)
    assert counted == pytest.approx(t[6] - t[0], abs=0.01)
    assert TtotalArtifact(
        fingerprint=None, trigger="force-desired", stages=stages, measured_total_s=counted,
        policy_lag_bound_s=60, planned_total_s=counted + 60,
        provenance={"kind": "emulated", "created_at": "2026-11-30T00:00:00Z", "source": "x"},
    )  # fmt: skip


def test_qmax_ratios_are_the_window_mean_over_the_client_mean(reference_qmax_path) -> None:
    from tts_bench.artifacts.files import load_artifact

    qmax = load_artifact(reference_qmax_path, QmaxArtifact)
    ladder = LadderSettings(rungs=[r.concurrency for r in qmax.rungs], hold_s=60, measure_s=30,
                            idle_s=10, start_epoch=1000.0)  # fmt: skip
    qmax = qmax.model_copy(update={"ladder": ladder})
    w0, w1 = ladder.measure_window(1)
    points = [MetricPoint(w0 - 10, 99.0), MetricPoint(w0, 4.0), MetricPoint(w0 + 10, 6.0)]
    points += [MetricPoint(w1 - 5, 99.0), MetricPoint(w1, 99.0)]  # partly or wholly after it
    assert window_mean(points, w0, w1) == 5.0
    # Rung 3: no whole period inside its window, one inside its hold.
    h0 = ladder.measure_window(2)[1] - ladder.hold_s
    points.append(MetricPoint(h0 + 2, 7.0))
    joined = ratios_for(qmax, points)
    assert joined.rungs[1].cloudwatch_ratio == round(5.0 / qmax.rungs[1].client_mean_in_flight, 3)
    assert joined.rungs[2].cloudwatch_ratio == round(7.0 / qmax.rungs[2].client_mean_in_flight, 3)
    assert joined.rungs[0].cloudwatch_ratio is None  # no point inside its window or hold


def test_invocations_are_joined_over_two_whole_minutes_of_each_rungs_hold(
    reference_qmax_path,
) -> None:
    """The fleet rule's metric: the minute Sums over the requests the client sent in the same
    minutes; a rung whose hold holds fewer than two whole minutes gets no ratio (never a guess)."""
    from tests.ladder.synthetic import closed_loop
    from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.measure.ladder.live.cloudwatch_join import invocation_ratios_for

    qmax = load_artifact(reference_qmax_path, QmaxArtifact)
    ladder = LadderSettings(rungs=[r.concurrency for r in qmax.rungs], hold_s=200, measure_s=60,
                            idle_s=10, start_epoch=960.0)  # fmt: skip
    qmax = qmax.model_copy(update={"ladder": ladder})
    w1 = ladder.measure_window(1)[1]
    h0 = w1 - ladder.hold_s
    first = h0 + (-h0 % 60)  # the first whole minute inside the hold
    samples = closed_loop(2, h0, w1, 1000.0)  # 2 users, a request a second each
    sent = [sum(1 for s in samples if m <= s.start < m + 60) for m in (first, first + 60)]
    points = [MetricPoint(first, sent[0] * 0.98), MetricPoint(first + 60, float(sent[1]))]
    points.append(MetricPoint(w1 - 30, 1e9))  # ends after the hold: not the rung's
    joined = invocation_ratios_for(qmax, points, samples)
    key = INVOCATIONS_RATIO_STAT.key
    expected = (sent[0] * 0.98 + sent[1]) / sum(sent)
    assert joined.rungs[1].cloudwatch_ratios[key] == pytest.approx(expected, abs=1e-3)
    assert expected < 1
    assert key not in joined.rungs[0].cloudwatch_ratios
    # One whole minute is not enough.
    one = invocation_ratios_for(qmax, points[:1] + points[2:], samples)
    assert key not in one.rungs[1].cloudwatch_ratios
    short = qmax.model_copy(
        update={"ladder": ladder.model_copy(update={"hold_s": 110, "measure_s": 40})}
    )
    assert all(
        key not in r.cloudwatch_ratios for r in invocation_ratios_for(short, points, samples).rungs
    )


def test_quota_refuses_with_the_numbers() -> None:
    check = QuotaCheck("ml.g5.xlarge", quota=2, running=2, region="us-east-1")
    with pytest.raises(RefusalError, match="quota 2, 2 running, 0 free, 1 needed"):
        check.require(1)
    QuotaCheck("ml.g5.xlarge", quota=3, running=2, region="us-east-1").require(1)


@given(st.lists(st.integers(1, 7), min_size=1, max_size=40))
def test_payload_parts_re_split_at_newlines(cuts: list[int]) -> None:
    text = b'{"type":"chunk","n":1}\n{"type":"chunk","n":2}\n\n{"type":"done"}\n'
    parts, i = [], 0
    for cut in cuts:
        parts.append({"PayloadPart": {"Bytes": text[i : i + cut]}})
        i += cut
    parts.append({"PayloadPart": {"Bytes": text[i:]}})
    assert list(payload_lines(parts)) == [line for line in text.split(b"\n") if line]


def test_stream_failures_are_named() -> None:
    from botocore.exceptions import ClientError, EventStreamError
    from urllib3.exceptions import ProtocolError

    with pytest.raises(StreamEventError, match="ModelStreamError"):
        list(payload_lines([{"ModelStreamError": {"ErrorCode": "StreamBroken"}}]))
    saturated = ClientError(
        {"Error": {"Code": "ModelError", "Message": "x"}, "OriginalStatusCode": 503,
         "OriginalMessage": '{"error": "queue_saturated"}'},
        "InvokeEndpointWithResponseStream",
    )  # fmt: skip
    assert failure_of(saturated) == (
        'ModelError (container 503): {"error": "queue_saturated"}',
        Outcome.REJECTED,
    )
    throttled = ClientError({"Error": {"Code": "ThrottlingException"}}, "Invoke")
    assert failure_of(throttled)[0].startswith("ThrottlingException")
    broken = EventStreamError({"Error": {"Code": ""}}, "InvokeEndpointWithResponseStream")
    assert failure_of(broken)[0].startswith("EventStreamError: ModelStreamError")
    assert failure_of(ProtocolError("cut"))[0] == "ProtocolError: cut"
    assert failure_of(ValueError("x")) is None
