"""A run's artifacts for the report: the committed reference chain, a simulation with its PNG,
a surge check, and a rehearsal built through its model, some of them carrying hostile strings."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tts_bench.artifacts.files import dump_json
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.rehearsal import (
    Agreement,
    DesiredAgreement,
    LagAgreement,
    RehearsalArtifact,
    RehearsalInputs,
    Run,
    RunTotals,
    ScaleAction,
    ShedAgreement,
    Window,
)
from tts_bench.artifacts.simulation import AwsSemanticsRecord, InputFile
from tts_bench.planning.aws.semantics import DOCUMENTED

MEASUREMENTS = Path(__file__).resolve().parents[2] / "measurements"
SIMULATION = MEASUREMENTS / "simulate-kokoro-82m-g5xlarge-8b1b96bc-d881952d.json"
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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rehearsal(qmax: Path, ttotal: Path) -> RehearsalArtifact:
    """A rehearsal of the fleet plan through its model: two runs of 40 windows, one scale-out
    each, agreement on desired counts and sheds, a detection lag, a hostile endpoint name."""
    fingerprint = json.loads(qmax.read_text())["fingerprint"]

    def run(source: str, shed: int, lag_s: float) -> Run:
        windows = [
            Window(t_s=10.0 * (i + 1), offered=i, admitted=i, shed=0, desired=1 + (i >= 20),
                   in_service=1 + (i >= 30))
            for i in range(40)
        ]  # fmt: skip
        return Run(
            source=source,  # type: ignore[arg-type]
            totals=RunTotals(requests=780, shed=shed, shed_share=shed / 780, instance_hours=0.17,
                             peak_desired=2),
            windows=windows,
            alarms=[],
            actions=[ScaleAction(t_s=200.0, before=1, after=2, role="burst", alarm="burst-high",
                                 lag_s=lag_s)],
        )  # fmt: skip

    return RehearsalArtifact(
        fingerprint=fingerprint,
        inputs=RehearsalInputs(
            traffic="diurnal:1:30:600", duration_s=400.0, seed=1, arrivals=780, endpoint=HOSTILE,
            variant="AllTraffic", rate_scale=8.0, time_scale=10.0, request_weight=80.0,
            min_instances=1, max_instances=4, initial_instances=1, start_delay_s=181.0,
            plan_id="d6de5fd9cda1", plan_rule="fleet", replays=10,
            files={"plan": InputFile(path=str(FLEET_PLAN), sha256=_sha256(FLEET_PLAN)),
                   "qmax": InputFile(path=str(qmax), sha256=_sha256(qmax)),
                   "ttotal": InputFile(path=str(ttotal), sha256=_sha256(ttotal))},
            aws_semantics=AwsSemanticsRecord(**DOCUMENTED.record()),
        ),
        rehearsed=run("rehearsed", 3, 14.0),
        simulated=run("simulated", 2, 12.5),
        replays=[],
        agreement=Agreement(
            desired=DesiredAgreement(minutes=4, agreeing=4, share=1.0, shift_s=10.0,
                                     replays_agreeing=9, replays_share=0.9, replay_quantile=0.8,
                                     passed=True),
            shed=ShedAgreement(rehearsed=3 / 780, simulated_mean=0.0041, simulated_sd=0.0012,
                               tolerance=0.0051, passed=True),
            lags=[LagAgreement(role="burst", modelled_s=15.0, rehearsed_s=[14.0],
                               simulated_s=[12.5])],
            scaled_out_before_shedding=True,
        ),
        provenance=Provenance(kind="emulated", created_at="2026-12-01T00:00:00Z",
                              source="local cloud, curve instances", curve_modelled=True),
    )  # fmt: skip


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
    rehearsal.write_text(dump_json(_rehearsal(reference_qmax_path, reference_ttotal_path)))
    shutil.copy(SIMULATION.with_suffix(".png"), rehearsal.with_suffix(".png"))
    return folder


@pytest.fixture(scope="module")
def run_files(run_folder: Path) -> list[Path]:
    order = ("qmax-", "ttotal-", "plan-", "surge-", "simulate-", "rehearsal-")
    return sorted(run_folder.glob("*.json"), key=lambda p: order.index(p.name.split("-")[0] + "-"))
