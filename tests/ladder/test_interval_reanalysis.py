"""A committed ladder that predates the intervals, judged again from its samples (issue 38)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.cli import main
from tts_bench.measure.ladder.interval_reanalysis import with_intervals
from tts_bench.measure.samples import read_samples, samples_path

# H200 run 6, main's build, serial: Q_max 25, failing at 26 (measurements/lab/gpu-bench.md)
RUN6_SERIAL = (
    Path(__file__).resolve().parents[2]
    / "measurements/lab/h200-run6/in-process"
    / "qmax-kokoro-82m-local-http-localnvidiah200-23dc6a61-ed1e5e.json"
)


def test_every_rung_gains_an_interval_and_its_recorded_figures_stay():
    qmax = load_artifact(RUN6_SERIAL, QmaxArtifact)
    assert qmax.q_max_interval is None
    judged = with_intervals(qmax, read_samples(samples_path(RUN6_SERIAL)), 0.95)
    # 7 s windows of 67-96 requests, worth 21-48 independent ones: nothing passes at 95 %, and
    # c=26 fails even so (its interval's lower end is above the SLO)
    assert [r.verdict for r in judged.rungs] == ["undecided", "undecided", "undecided", "fail"]
    assert all(r.ttfab_p95_interval.effective_samples < r.ok for r in judged.rungs)
    interval = judged.q_max_interval
    assert (interval.low, judged.q_max, interval.high, interval.failing_above) == (None, 25, 25, 26)
    for before, after in zip(qmax.rungs, judged.rungs, strict=True):
        assert after.model_copy(update={"ttfab_p95_interval": None, "verdict": None}) == before
        assert after.ttfab_p95_interval.samples == after.ok


def test_the_command_prints_each_rung_and_q_max_interval(capsys: pytest.CaptureFixture) -> None:
    assert main(["interval", str(RUN6_SERIAL)]) == 0
    out = capsys.readouterr().out
    assert "c=26" in out and "fail" in out
    assert "Q_max 25; interval [-, 25], fails at 26; undecided: 1, 24, 25" in out


def test_the_command_refuses_a_level_below_the_floor(capsys: pytest.CaptureFixture) -> None:
    assert main(["interval", "--confidence", "0.5", str(RUN6_SERIAL)]) != 0
    assert "--confidence 0.5" in capsys.readouterr().err
