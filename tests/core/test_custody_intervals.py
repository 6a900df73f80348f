"""`verify` re-derives each rung's p95 interval, its verdict and Q_max's interval from the
samples (issue 38), and refuses an edit of any of them naming the field."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.measured_set import EMULATED_FINGERPRINT, write_ladder
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.schema import QmaxArtifact, load_artifact
from tts_bench.cli import main
from tts_bench.custody.folder import ArtifactFolder
from tts_bench.errors import TtsBenchError

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
