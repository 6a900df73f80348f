"""`verify` re-derives each rung's p95 interval, its verdict and Q_max's interval from the
samples (issue 38), and refuses an edit of any of them naming the field."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.ladder.test_undecided_hold import T0, steady_rung
from tests.measured_set import EMULATED_FINGERPRINT, write_ladder
from tts_bench.artifacts.files import load_artifact, write_artifact
from tts_bench.artifacts.fingerprint import Transport, qmax_filename
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.cli import main
from tts_bench.custody.folder import ArtifactFolder
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder.raw_record import QmaxRaw, raw_path, write_raw
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.statistics import (
    VerdictRule,
    build_qmax_artifact,
    extend_unstable,
    ladder_rungs,
)
from tts_bench.measure.samples import samples_path, write_samples

LOCAL = EMULATED_FINGERPRINT.model_copy(
    update={"instance_type": "local-test cpu", "transport": Transport.LOCAL_HTTP}
)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 100 ms serial: about 500 requests a window; c=50 passes (p95 2.8 s), c=60 fails (3.36 s)
    folder = tmp_path_factory.mktemp("intervals")
    return write_ladder(folder, LOCAL, "measured", slo_ms=3000.0, confidence=0.95)


@pytest.fixture
def ladder(written: Path, tmp_path: Path) -> Path:
    """A copy of the written ladder and its raw data, for one test to edit."""
    for beside in written.parent.iterdir():
        shutil.copy(beside, tmp_path / beside.name)
    return tmp_path / written.name


def test_a_ladder_with_intervals_checks(ladder: Path) -> None:
    qmax = load_artifact(ladder, QmaxArtifact)
    assert qmax.ladder.confidence == 0.95
    assert [r.verdict for r in qmax.rungs] == ["pass"] * 5 + ["fail"]
    assert all(r.ttfab_p95_interval.samples == r.ok for r in qmax.rungs)
    interval = qmax.q_max_interval
    assert (interval.low, qmax.q_max, interval.high, interval.failing_above) == (50, 50, 50, 60)
    assert "recomputed from" in ArtifactFolder(ladder.parent).check(ladder).line()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["rungs"][0]["ttfab_p95_interval"].update(upper_ms=1.0), "upper_ms"),
        (lambda d: d["rungs"][0]["ttfab_p95_interval"].update(samples=7), "samples"),
        (lambda d: d["q_max_interval"].update(undecided=[40]), "q_max_interval"),
        (lambda d: d["rungs"][5].update(verdict="undecided"), "verdict"),
    ],
)
def test_an_edited_interval_or_verdict_is_refused_naming_it(
    ladder: Path, change: Callable[[dict], None], named: str
) -> None:
    data = json.loads(ladder.read_text(encoding="utf-8"))
    change(data)
    ladder.write_text(json.dumps(data, indent=2), encoding="utf-8")
    with pytest.raises(TtsBenchError) as refused:
        ArtifactFolder(ladder.parent).check(ladder)
    assert named in str(refused.value)


def test_the_report_shows_the_intervals(ladder: Path) -> None:
    page = ladder.parent / "report.html"
    assert main(["report", "--html", str(page), str(ladder)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "[50, 50] at 95%, failing at 60" in text
    assert "confidence interval per rung" in text


def test_a_widened_window_is_found_again_by_verify(tmp_path: Path) -> None:
    """An undecided rung held longer: verify reads its wider window from `ladder.widened_s`."""
    schedule = LadderSchedule((1,), hold_s=20, measure_s=10, idle_s=0, max_hold_s=60)
    samples = steady_rung(60.0)
    longer = extend_unstable(schedule, 0, samples, T0, VerdictRule(1000.0, 0.95))
    assert longer is not None and longer.widening_s(0) == 10.0
    rungs = ladder_rungs(samples, [], longer, T0, 1000.0, T0 + 100, confidence=0.95)
    provenance = Provenance.now("measured", "steady synthetic rung")
    artifact = build_qmax_artifact(rungs, LOCAL, longer, 1000.0, provenance, T0, confidence=0.95)
    assert artifact.rungs[0].verdict == "pass" and artifact.ladder.widened_s == [10.0]
    path = write_artifact(artifact, tmp_path, qmax_filename(LOCAL, "measured"))
    write_samples(samples_path(path), samples)
    write_raw(raw_path(path), QmaxRaw.of(LOCAL, []))
    assert "recomputed from" in ArtifactFolder(tmp_path).check(path).line()
    data = json.loads(path.read_text(encoding="utf-8"))
    data["ladder"]["widened_s"] = [0.0]  # judged on the last 10 s only, it is undecided
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    with pytest.raises(TtsBenchError):
        ArtifactFolder(tmp_path).check(path)
