"""The committed H200 summaries follow from the committed qmax artifacts; the plan's alarm rule
follows the engine mode those artifacts report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.engine_modes import BATCHING_ENGINE_MODE, SERIAL_ENGINE_MODE, engine_batches
from tts_bench.measure.gpu_summary import GpuSummaryError, q_max_resolution, recompute
from tts_bench.planning.findings import alarm_threshold

MEASUREMENTS = Path(__file__).resolve().parents[2] / "measurements"
RUNS = [
    MEASUREMENTS,
    MEASUREMENTS / "lab" / "h200-run1",
    MEASUREMENTS / "lab" / "h200-run2",
    MEASUREMENTS / "lab" / "h200-run3",
    MEASUREMENTS / "lab" / "h200-run6" / "in-process",
]


def artifacts_of(folder: Path) -> dict[str, QmaxArtifact]:
    found = {}
    for path in folder.glob("qmax-*-localnvidiah200-*.json"):
        artifact = QmaxArtifact.model_validate_json(path.read_text())
        assert artifact.fingerprint is not None
        found[artifact.fingerprint.performance_env["ENGINE_MODE"]] = artifact
    return found


@pytest.mark.parametrize("folder", RUNS, ids=lambda p: p.name)
def test_the_committed_summary_is_recomputed_from_the_committed_artifacts(folder: Path) -> None:
    summary = json.loads((folder / "gpu-summary-h200.json").read_text())
    found = artifacts_of(folder)
    assert set(found) == {SERIAL_ENGINE_MODE, BATCHING_ENGINE_MODE}
    again = recompute(summary, found[SERIAL_ENGINE_MODE], found[BATCHING_ENGINE_MODE])
    assert json.loads(json.dumps(again)) == summary
    assert summary["weights"] == "real-int8-converted"
    assert "NVIDIA H200" in found[BATCHING_ENGINE_MODE].fingerprint.instance_type


def test_the_current_run_compares_engines_and_pins_q_max_within_five_percent() -> None:
    summary = json.loads((MEASUREMENTS / "gpu-summary-h200.json").read_text())
    new, old = summary["offline_segments_per_s"], summary["offline_segments_per_s_baseline"]
    assert set(new) >= {"1", "64"} and set(old) >= {"1", "64"}
    assert summary["offline_speedup_by_batch"]["64"] == round(new["64"] / old["64"], 3)
    assert all(0 < r <= 0.05 for r in summary["q_max_resolution"].values())
    assert summary["parity"]["durations_equal"] is True
    assert summary["parity"]["padded_vs_alone_r"] >= 0.999
    assert (
        summary["ready_s_eager"] <= summary["ready_s_warm_cache"] <= summary["ready_s_cold_cache"]
    )


def test_q_max_resolution_is_the_gap_to_the_first_failing_rung_above() -> None:
    found = artifacts_of(MEASUREMENTS)
    batched = found[BATCHING_ENGINE_MODE]
    first_fail = min(r.concurrency for r in batched.rungs if not r.passes)
    assert batched.q_max is not None
    assert q_max_resolution(batched) == round((first_fail - batched.q_max) / batched.q_max, 4)
    passing = batched.model_copy(update={"rungs": [r for r in batched.rungs if r.passes]})
    assert q_max_resolution(passing) is None  # never failed: not bracketed, no resolution


def test_swapped_modes_are_refused() -> None:
    summary = json.loads((MEASUREMENTS / "gpu-summary-h200.json").read_text())
    found = artifacts_of(MEASUREMENTS)
    with pytest.raises(GpuSummaryError, match="serial then a batching"):
        recompute(summary, found[BATCHING_ENGINE_MODE], found[SERIAL_ENGINE_MODE])


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"ENGINE_MODE": "concurrent", "ENGINE_MAX_BATCH": "64"}, True),
        ({"ENGINE_MODE": "concurrent", "ENGINE_MAX_BATCH": "1"}, False),
        ({"ENGINE_MODE": "concurrent", "ENGINE_BACKEND": "onnx"}, False),
        ({"ENGINE_MODE": "serial", "ENGINE_MAX_BATCH": "64"}, False),
        ({"ENGINE_MODE": "concurrent", "ENGINE_MAX_BATCH": "many"}, False),
    ],
)
def test_engine_batches_only_when_concurrent_with_a_batch_above_one(env, expected) -> None:
    assert engine_batches(env) is expected


def test_the_plan_takes_the_batched_alarm_from_the_server_at_the_trigger_rung() -> None:
    found = artifacts_of(MEASUREMENTS)
    batched = found[BATCHING_ENGINE_MODE]
    chosen = alarm_threshold(batched, c_scale_max=100.0, c1_p95_ms=150.0)
    threshold, rule = chosen.threshold_ms, chosen.rule
    trigger = next(r for r in batched.rungs if r.concurrency >= 100)
    assert rule == "server-first-chunk-p95-at-trigger"
    assert trigger.server_first_chunk_p95_ms is not None
    assert threshold <= trigger.server_first_chunk_p95_ms < threshold + 1
    serial_rule = alarm_threshold(found[SERIAL_ENGINE_MODE], c_scale_max=10.0, c1_p95_ms=150.0).rule
    assert serial_rule == "ttfab-p95-c1"
