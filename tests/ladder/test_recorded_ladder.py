"""A ladder recorded with the code before the ladder's control moved into `tts_bench.measure`.

`recorded/ladder.qmax.json` and its samples were written by the earlier `loadtest/qmax.py` (a
one-process local-http ladder: rungs 1 and 6 with --max-hold-s 40 and --refine, so both coarse
rungs were held longer, c=6 failed, and two probes bisected, the second held longer too);
`ladder.cpu.json` holds the load generator's CPU readings and the time the run ended, which
that code kept in memory only. The ladder's decisions and its artifact, rebuilt from them by
today's `LadderRun`, must be what that code decided and wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.measure.ladder.run import LadderRun, ProbeWindow
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.state import ShapeSnapshot
from tts_bench.measure.ladder.statistics import CpuReading
from tts_bench.measure.samples import read_samples, samples_path

RECORDED = Path(__file__).resolve().parent / "recorded"


@pytest.fixture(scope="module")
def recorded() -> QmaxArtifact:
    return load_artifact(RECORDED / "ladder.qmax.json", QmaxArtifact)


@pytest.fixture(scope="module")
def ended_at() -> float:
    return json.loads((RECORDED / "ladder.cpu.json").read_text())["finished_at"]


def schedule_of(artifact: QmaxArtifact, extended: bool) -> LadderSchedule:
    ladder = artifact.ladder
    assert ladder is not None
    return LadderSchedule(
        tuple(ladder.rungs), ladder.hold_s, ladder.measure_s, ladder.idle_s,
        max_hold_s=ladder.max_hold_s, extended_s=tuple(ladder.extended_s) if extended else (),
    )  # fmt: skip


def run_of(artifact: QmaxArtifact, extended: bool) -> LadderRun:
    """A `LadderRun` holding the recorded samples and CPU readings, before any decision."""
    assert artifact.ladder is not None and artifact.ladder.start_epoch is not None
    refinement = artifact.refinement
    run = LadderRun(
        artifact.slo_ms,
        artifact.ladder.start_epoch,
        ShapeSnapshot(schedule_of(artifact, extended)),
        refine_pct=None if refinement is None else refinement.resolution_pct,
        underrun_slo=artifact.ladder.underrun_slo_share,
    )
    path = RECORDED / "ladder.qmax.json"
    run.store.samples.extend(read_samples(samples_path(path)))
    cpu = json.loads((RECORDED / "ladder.cpu.json").read_text())["cpu"]
    run.store.cpu.extend(CpuReading(worker, ts, cpu_s) for worker, ts, cpu_s in cpu)
    return run


def test_the_recording_is_the_ladder_this_test_is_about(recorded):
    assert [r.concurrency for r in recorded.rungs] == [1, 6]
    assert recorded.ladder is not None and recorded.ladder.extended_s == [10.0, 10.0]
    assert recorded.refinement is not None
    assert [(p.rung.concurrency, p.extended_s) for p in recorded.refinement.probes] == [
        (3, 10.0),
        (2, 10.0),
    ]


def test_the_coarse_rungs_are_held_longer_exactly_as_recorded(recorded):
    run = run_of(recorded, extended=False)
    for index in range(len(recorded.rungs)):
        while run.extend_rung(index, now=0.0) is not None:
            run.release()
    assert run.snapshot.schedule.extended_s == (10.0, 10.0)
    assert run.bracket(run.rung_window(1)[1]) is not None  # c=1 passed, c=6 failed


def test_each_probe_is_held_and_judged_as_recorded(recorded):
    run = run_of(recorded, extended=True)
    assert recorded.refinement is not None and recorded.ladder is not None
    run.begin_refinement(run.rung_window(1)[1])
    for probe in recorded.refinement.probes:
        end_s = probe.window_end_epoch - probe.extended_s - recorded.ladder.start_epoch
        window = run.add_probe(probe.rung.concurrency, end_s - recorded.ladder.hold_s)
        while (longer := run.extend_probe(probe.rung.concurrency, window, now=0.0)) is not None:
            window = longer
        assert window == pytest.approx((probe.window_start_epoch, probe.window_end_epoch))
        assert run.judge(probe.rung.concurrency, window) == probe.rung
        run.record_probe(probe.rung.concurrency, window)
    run.end_refinement(recorded.refinement.ended_by)
    assert [p.extended_s for p in run.probe_windows] == [10.0, 10.0]


def test_the_recorded_samples_rebuild_the_recorded_artifact(recorded, ended_at):
    run = run_of(recorded, extended=True)
    assert recorded.refinement is not None
    run.probe_windows.extend(
        ProbeWindow(p.rung.concurrency, p.window_start_epoch, p.window_end_epoch, p.extended_s)
        for p in recorded.refinement.probes
    )
    run.refine_ended_by = recorded.refinement.ended_by
    assert recorded.fingerprint is not None
    rebuilt = run.artifact(recorded.fingerprint, recorded.provenance, ended_at)
    assert rebuilt is not None
    assert rebuilt.model_dump(mode="json") == recorded.model_dump(mode="json")
