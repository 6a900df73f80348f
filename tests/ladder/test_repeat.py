"""--repeat R (issue 38): R bisections around the knee, each recorded; Q_max is the lowest
repeat's conservative value; `verify` re-derives the repeats and the report shows them.

The ladder is `test_ladder_control`'s (c=1 passes, c=4 fails at a 2 s SLO), its probes built
by arithmetic: both repeats probe c=2 first; one finds it fast, the other slow.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tts_bench.artifacts.files import load_artifact, write_artifact
from tts_bench.artifacts.fingerprint import qmax_filename
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.custody.folder import ArtifactFolder
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder.flags import add_ladder_arguments, ladder_arguments, ladder_options
from tts_bench.measure.ladder.raw_record import QmaxRaw, raw_path, write_raw
from tts_bench.measure.ladder.run import LadderRun
from tts_bench.measure.ladder.schedule import describe_schedule
from tts_bench.measure.ladder.state import ShapeSnapshot
from tts_bench.measure.ladder.statistics import CpuReading
from tts_bench.measure.samples import samples_path, write_samples
from tts_bench.report.ladder_tables import repeats_table

from .synthetic import closed_loop
from .test_ladder_control import FINGERPRINT, SCHEDULE, T0, ladder_samples


def repeated_run(repeat: int, latencies_ms: list[float], confidence: float | None) -> LadderRun:
    """The coarse ladder, then one c=2 probe per repeat at the given latencies (in turn)."""
    run = LadderRun(
        2000.0, T0, ShapeSnapshot(SCHEDULE), refine_pct=5.0, confidence=confidence, repeat=repeat
    )
    run.store.samples.extend(ladder_samples())
    run.store.cpu.extend(CpuReading("host:1", T0 + s, 0.01 * s) for s in range(0, 200))
    run.begin_refinement(run.rung_window(1)[1])
    start_s = 44.0
    for index, latency in enumerate(latencies_ms):
        window = run.add_probe(2, start_s)
        run.store.samples.extend(closed_loop(2, T0 + start_s, T0 + start_s + 20, latency))
        run.judge(2, window)
        run.record_probe(2, window, index)
        start_s += 22.0
    for index in range(repeat):
        assert run.snapshot.refining  # the run idles until the last repeat has ended
        run.end_refinement("interrupted", index)
    assert not run.snapshot.refining
    return run


def artifact_of(run: LadderRun) -> QmaxArtifact:
    artifact = run.artifact(FINGERPRINT, Provenance.now("measured", "test"), T0 + 200)
    assert artifact is not None
    return artifact


def test_each_repeat_is_recorded_and_q_max_is_the_lowest():
    # c=2 at 1.5 s latency (TTFAB 0.6-1.0 s) passes; at 6 s (TTFAB 2.4 s) it fails the 2 s SLO
    artifact = artifact_of(repeated_run(2, [1500.0, 6000.0], confidence=None))
    repeats = artifact.repeats
    assert repeats is not None and len(repeats.others) == 1
    assert [p.rung.concurrency for p in repeats.others[0].probes] == [2]
    assert (repeats.q_max_each, repeats.conservative_each) == ([2, 1], [2, 1])
    assert (repeats.q_max, repeats.spread) == (1, 1)
    assert artifact.refinement.q_max == 2  # the first repeat as a lone bisection would say
    assert artifact.refined_q_max == 1  # what a plan uses: the lowest
    # Written and read back, the artifact's validators agree with the record.
    assert QmaxArtifact.model_validate_json(artifact.model_dump_json()) == artifact


def test_with_a_confidence_level_each_repeat_counts_its_conservative_end():
    # 1.5 s latency over 20 s: about 2 × 10 requests a window, too few for an upper end on a
    # p95, so c=2 is undecided in both; c=1 (0.5 s, 20 requests) likewise: conservative none.
    artifact = artifact_of(repeated_run(2, [1500.0, 1500.0], confidence=0.95))
    repeats = artifact.repeats
    assert repeats.q_max_each == [1, 1]  # undecided probes narrow nothing
    assert repeats.conservative_each == [None, None] and repeats.q_max is None
    assert artifact.refined_q_max is None


def test_one_repeat_writes_the_artifact_as_before():
    artifact = artifact_of(repeated_run(1, [1500.0], confidence=None))
    assert artifact.repeats is None
    assert "repeats" not in json.loads(artifact.model_dump_json())
    assert artifact.refined_q_max == artifact.refinement.q_max == 2


@pytest.fixture
def written(tmp_path: Path) -> Path:
    run = repeated_run(2, [1500.0, 6000.0], confidence=0.95)
    artifact = artifact_of(run)
    path = write_artifact(artifact, tmp_path, qmax_filename(FINGERPRINT, "measured"))
    write_samples(samples_path(path), run.store.samples)
    write_raw(raw_path(path), QmaxRaw.of(FINGERPRINT, run.store.cpu))
    return path


def test_verify_recomputes_every_repeat_from_the_samples(written: Path):
    assert "2 probes" in ArtifactFolder(written.parent).check(written).line()


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_verify_refuses_an_edited_repeat_probe_naming_it(written: Path):
    edit(written, lambda d: d["repeats"]["others"][0]["probes"][0]["rung"].update(ttfab_p50_ms=1.0))
    with pytest.raises(
        TtsBenchError,
        match=r"repeats\.others\[0\]\.probes\[0\]\.rung\.ttfab_p50_ms is 1\.0; recomputed",
    ):
        ArtifactFolder(written.parent).check(written)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["repeats"].update(spread=5),
        lambda d: d["repeats"].update(q_max_each=[2, 1]),
        lambda d: d.pop("refinement"),
    ],
)
def test_an_edited_repeats_record_does_not_load(written: Path, change):
    edit(written, change)
    with pytest.raises(TtsBenchError, match="repeats"):
        load_artifact(written, QmaxArtifact)


def test_the_report_shows_the_repeats_side_by_side():
    html = repeats_table(artifact_of(repeated_run(2, [1500.0, 6000.0], confidence=None)))
    assert html is not None
    text = str(html)
    assert "2 pass" in text and "2 fail" in text and "lowest conservative value, 1" in text


def parsed(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_ladder_arguments(parser)
    return parser.parse_args(list(args))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--repeat", "3"], "--repeat 3 repeats the refinement around the knee: add --refine"),
        (["--repeat", "0", "--refine"], "--repeat 0: give a whole number from 1 to 20"),
        (["--repeat", "21", "--refine"], "--repeat 21: give a whole number from 1 to 20"),
    ],
)
def test_a_bad_repeat_is_refused_in_one_line(args, message):
    with pytest.raises(TtsBenchError) as refused:
        ladder_options(parsed(*args))
    assert str(refused.value) == message


@settings(max_examples=30, deadline=None)
@given(repeat=st.integers(1, 20))
def test_the_recorded_command_repeats_the_repeat(repeat):
    first = ladder_options(parsed("--refine", "--repeat", str(repeat)))
    assert first.repeat == repeat
    assert ladder_options(parsed(*ladder_arguments(first))) == first
    # The dry run's worst case grows with the repeats: R bisections' probes.
    assert f"{repeat} bisections" in describe_schedule(first.schedule, 3000.0, 5.0, repeat) or (
        repeat == 1
    )


def test_plan_refuses_a_repeated_ladder_whose_q_max_is_unknown_in_one_line():
    from tests.core.ladders import SOURCES, ttotal_artifact
    from tts_bench.planning.plan import PlanRequest, derive_plan

    qmax = artifact_of(repeated_run(2, [1500.0, 1500.0], confidence=0.95))
    request = PlanRequest(peak_rps=200, rule="published", slo_ms=2000.0)
    with pytest.raises(TtsBenchError) as refused:
        derive_plan(qmax, ttotal_artifact(), request, SOURCES)
    assert "--repeat Q_max is the lowest repeat's conservative value" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_judging_a_repeated_ladder_again_keeps_its_repeats_consistent():
    from tts_bench.measure.ladder.interval_reanalysis import with_intervals

    run = repeated_run(2, [1500.0, 6000.0], confidence=None)
    judged = with_intervals(artifact_of(run), run.store.samples, 0.95)
    assert judged.repeats is not None
    assert [p.rung.verdict for p in judged.repeats.others[0].probes] != [None]
    assert judged.repeats == artifact_of(repeated_run(2, [1500.0, 6000.0], 0.95)).repeats


def test_the_report_says_why_a_repeated_ladder_hasno_q_max_text():
    from tts_bench.report.ladder_tables import no_q_max_text

    artifact = artifact_of(repeated_run(2, [1500.0, 1500.0], confidence=0.95))
    assert no_q_max_text(artifact) == "none (a repeat's conservative Q_max is unknown)"
