"""A run's artifacts for the report: the committed reference chain, a simulation with its PNG,
a surge check, and a rehearsal whose kind this build shows from its JSON, some of them carrying
hostile strings."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

MEASUREMENTS = Path(__file__).resolve().parents[2] / "measurements"
SIMULATION = MEASUREMENTS / "simulate-kokoro-82m-g5xlarge-8b1b96bc-2e09ac2a.json"
FLEET_PLAN = MEASUREMENTS / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"
# A string that would run script, load an image or end a table if the page did not escape it.
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"></td></table><script>1</script>"


def _surge(qmax: Path) -> dict:
    """A small surge artifact of the reference build (two 6 s runs, one step a second)."""
    qmax_json = json.loads(qmax.read_text())
    runs = [
        {
            "rate_rps": rate, "duration_s": 6.0, "seed": 1, "start_epoch": 1.0e9,
            "arrivals": 10, "admitted": 10 - shed, "shed": shed, "errors": 0,
            "shed_share": shed / 10, "ok": 10 - shed, "ttfab_p95_ms": 80.0, "ttfab_p99_ms": 95.0,
            "send_ttfab_p95_ms": 79.0, "max_send_lag_ms": 2.0, "served_rps": rate * 0.9,
            "ladder_rps_at_occupancy": rate, "mean_occupancy": occupancy, "max_occupancy": 3,
            "reached_q_max": False,
            "prediction": {"shed_share": shed / 12, "reach_probability": 0.01,
                           "mean_occupancy": occupancy, "trials": 100, "seed": 1},
            "closed_loop_ttfab_p95_ms": 70.0,
            "occupancy": {"step_s": 1.0, "measured": [0, 1, 2, 3, 2, 1],
                          "model_mean": [0.5, 1.0, 1.5, 1.5, 1.5, 1.5]},
        }
        for rate, shed, occupancy in ((1.5, 0, 1.2), (2.5, 1, 2.1))
    ]  # fmt: skip
    return {
        "artifact": "surge", "schema_version": 1, "fingerprint": qmax_json["fingerprint"],
        "q_max": 50, "qmax_path": str(qmax),
        "qmax_sha256": hashlib.sha256(qmax.read_bytes()).hexdigest(), "runs": runs,
        "provenance": {"kind": "measured", "created_at": "2026-12-01T00:00:00Z",
                       "source": HOSTILE},
    }  # fmt: skip


def _rehearsal() -> dict:
    """The shape of a rehearsal artifact, with more windows than the page lists."""
    windows = [{"t_s": 10.0 * i, "offered": i, "admitted": i, "shed": 0} for i in range(40)]
    return {
        "artifact": "rehearsal", "schema_version": 1, "fingerprint": None,
        "inputs": {"traffic": "diurnal:1:30:600", "duration_s": 600.0, "seed": 1,
                   "endpoint": HOSTILE},
        "rehearsed": {"source": "rehearsed", "windows": windows,
                      "totals": {"requests": 780, "shed": 3, "shed_share": 0.0038}},
        "agreement": {"shed": {"rehearsed": 0.0038, "simulated_mean": 0.0041, "passed": True},
                      "desired": {"share": 0.97, "passed": True}},
        "provenance": {"kind": "emulated", "created_at": "2026-12-01T00:00:00Z",
                       "source": "local cloud, curve instances", "curve_modelled": True},
    }  # fmt: skip


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, reference_qmax_path, reference_ttotal_path) -> Path:
    """Copies of a run's artifacts in one folder."""
    folder = tmp_path_factory.mktemp("run")
    for path in (reference_qmax_path, reference_ttotal_path, FLEET_PLAN, SIMULATION,
                 SIMULATION.with_suffix(".png")):  # fmt: skip
        shutil.copy(path, folder / path.name)
    (folder / "surge-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json").write_text(
        json.dumps(_surge(reference_qmax_path))
    )
    rehearsal = folder / "rehearsal-kokoro-82m-fleet-test.json"
    rehearsal.write_text(json.dumps(_rehearsal()))
    shutil.copy(SIMULATION.with_suffix(".png"), rehearsal.with_suffix(".png"))
    return folder


@pytest.fixture(scope="module")
def run_files(run_folder: Path) -> list[Path]:
    order = ("qmax-", "ttotal-", "plan-", "surge-", "simulate-", "rehearsal-")
    return sorted(run_folder.glob("*.json"), key=lambda p: order.index(p.name.split("-")[0] + "-"))
