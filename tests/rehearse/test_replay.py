"""A rehearsal's replay: the simulator's own fleet and rules, on the curve the rehearsed
endpoint runs (slowed S × K-fold, each request counted S × K times)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import MEASUREMENTS, REFERENCE_QMAX, REFERENCE_TTOTAL
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.rehearse.replay import ReplaySetup, in_service_after_s, replay_arrivals
from tts_bench.rehearse.runs import simulated_run
from tts_bench.simulate.service import service_curves, slowed

PLAN = load_artifact(MEASUREMENTS / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact)
QMAX = load_artifact(REFERENCE_QMAX, QmaxArtifact)
TTOTAL = load_artifact(REFERENCE_TTOTAL, TtotalArtifact)


def test_a_slowed_curve_serves_f_times_slower_and_counts_each_request_f_times() -> None:
    curves = service_curves(QMAX, 50)
    slow = slowed(curves, 80.0)
    assert np.allclose(slow.service_rps * 80, curves.service_rps)
    assert slow.request_weight == 80 and curves.request_weight == 1
    assert slow.over_slo_from == curves.over_slo_from  # occupancy levels are unchanged


def test_new_instances_serve_at_the_ttotals_in_service_stage() -> None:
    """180.8 + 3.7 + 0 + 6.5 + 1.0 + 20.7: where curve instances (and routing) start serving."""
    assert in_service_after_s(TTOTAL) == pytest.approx(212.7)


def test_the_replay_counts_invocations_per_instance_as_the_weighted_cloud_does() -> None:
    setup = ReplaySetup.of(PLAN, QMAX, TTOTAL, (1, 40), initial=4, slow_down=100.0)
    times = np.arange(0.5, 60.0, 1.0)  # one a second for a minute, then nothing
    run = replay_arrivals(setup, times, 600.0, seed=1)
    line = run.timeline
    assert np.allclose(line.invocations_per_instance[:6], 10 * 100 / 4)
    assert line.invocations_per_instance[6:].sum() == 0
    # 60 × 100 / 4 = 1500 a minute per instance, over the 826.5 target: three such minutes would
    # scale out, one does not (and ten minutes are too few for the 15-minute scale-in). The
    # burst may act: a hundredfold-slowed minute holds more than 3.61 requests per instance.
    record = simulated_run(run, setup.shape, 4)
    high = next(a for a in record.alarms if a.kind == "high")
    assert [p.value for p in high.points][:2] == [pytest.approx(1500.0), 0.0]
    assert {a.role for a in record.actions} <= {"burst"}
    assert line.desired[-1] == max(line.desired)  # nothing scaled in
