"""The main job's steps against a stand-in target: what the job decides is the job's, whatever
the target (the real targets run in tests/ladder/test_local_run.py and the chain tests)."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.artifacts.schema import QmaxArtifact, sha256_file
from tts_bench.aws.validate import Comparison
from tts_bench.jobs.main_job import (
    MAX_LOCAL_SLO_MS,
    JobSettings,
    MainJobError,
    calibrated_slo_ms,
    report,
    run_main_job,
    stretched,
)
from tts_bench.measure.corpus import Utterance, load_corpus
from tts_bench.measure.ladder import LadderSchedule
from tts_bench.measure.ttotal_probe import ProbeSample
from tts_bench.planning.from_files import WrittenPlan

RECORDED = Path(__file__).resolve().parent / "recorded" / "ladder.qmax.json"
CORPUS = Path(__file__).resolve().parent / "corpora" / "short.txt"


@dataclass
class StandIn:
    """A target that serves every request in `latency_ms` and whose ladder is the recorded one."""

    latency_ms: float = 800.0
    fails: bool = False
    where: str = "stand-in"
    stopped: str = "stand-in stopped"
    uncontended: str = "the stand-in's"
    surge_ratio: float | None = None
    deploys: bool = False
    rehearses: bool = False
    log: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def running(self, step) -> Iterator[None]:
        self.log.append("start")
        try:
            yield
        finally:
            self.log.append("stop")

    def speak(self, utterance: Utterance) -> ProbeSample:
        if self.fails:
            return ProbeSample(0.0, None, None, 0.0, "HTTP 500: boom")
        return ProbeSample(1.0, self.latency_ms / 2, self.latency_ms, 0.0)

    def ladder(self, settings: JobSettings, schedule: LadderSchedule, slo_ms: float, step) -> Path:
        self.log.append(f"ladder {schedule.hold_s:g}/{schedule.measure_s:g} at {slo_ms:g}")
        return Path(shutil.copy(RECORDED, settings.out / RECORDED.name))

    def ttotal(self, settings, qmax_path: Path, qmax: QmaxArtifact, step):
        self.log.append("ttotal")
        return None

    def deploy(self, written: WrittenPlan, step) -> tuple[Comparison, ...]:
        raise AssertionError("a target that does not deploy is never asked to")

    def surge(self, settings, qmax_path: Path, validation: Sequence[Comparison], step):
        self.log.append("surge")
        return None


def settings(tmp_path: Path, **kw) -> JobSettings:
    given = {"slo_ms": None, **kw}
    return JobSettings(
        out=tmp_path, schedule=LadderSchedule((1, 2), 20.0, 10.0, 1.0), corpus_path=CORPUS,
        utterances=load_corpus(CORPUS), **given,
    )  # fmt: skip


def test_the_job_calibrates_measures_and_stops_its_target_then_plots(tmp_path):
    target, lines = StandIn(), []
    result = run_main_job(settings(tmp_path, stretch_windows=True), target, lines.append)
    # 3 × a 400 ms p95 TTFAB; three 800 ms requests fit the 10 s window already.
    assert (
        result.slo_ms == 1200.0 and "3 × the stand-in's uncontended p95 TTFAB" in result.slo_reason
    )
    assert target.log == ["start", "ladder 20/10 at 1200", "ttotal", "surge", "stop"]
    assert result.q_max == 1 and result.ttotal_path is None and result.plan_path is None
    assert any("plan skipped" in line for line in lines)
    stopped = next(i for i, line in enumerate(lines) if "stand-in stopped" in line)
    assert "plots:" in lines[stopped + 1]  # plotted once the target is stopped
    assert [p.name for p in result.pngs] == ["ladder.qmax.png"] and result.pngs[0].is_file()
    # then the run's page, beside its artifacts, its path printed
    assert result.page == tmp_path / "report-ladder.qmax.html" and result.page.is_file()
    assert lines[stopped + 2].endswith(f"report: {result.page}")
    assert '<section id="ladder">' in result.page.read_text()
    assert result.exit_code == 2  # no plan: the chain did not reach its end
    text = report(result)
    assert text.splitlines()[0] == "stand-in" and "validate" not in text
    assert "Q_max 1, bracketed" in text and "T_total not measured" in text
    assert f"report: {result.page}" in text


def test_what_names_the_ladder_the_job_replaced_is_removed_and_nothing_else(tmp_path):
    """A plan (and its plot) made from the ladder this run measures again no longer follows
    from anything here: the folder stays a consistent set for `tts-bench verify`."""
    old = tmp_path / RECORDED.name
    old.write_text(RECORDED.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    stale = tmp_path / "plan-old.json"
    stale.write_text(json.dumps({"artifact": "plan", "sources": {"qmax": {
        "sha256": sha256_file(old)}}}))  # fmt: skip
    stale.with_suffix(".png").write_bytes(b"plot")
    other = tmp_path / "plan-other.json"
    other.write_text(json.dumps({"artifact": "plan", "sources": {"qmax": {"sha256": "0" * 64}}}))
    lines: list[str] = []
    run_main_job(settings(tmp_path, slo_ms=5000.0), StandIn(), lines.append)
    assert not stale.exists() and not stale.with_suffix(".png").exists() and other.exists()
    assert any("removed plan-old.json: it was made from a file this run replaced" in line
               for line in lines)  # fmt: skip


def test_a_given_slo_skips_the_calibration_unless_windows_stretch(tmp_path):
    target = StandIn(fails=True)  # calibrating would fail
    result = run_main_job(settings(tmp_path, slo_ms=5000.0), target, lambda _: None)
    assert result.slo_ms == 5000.0 and result.slo_reason == "given with --slo-ms"
    with pytest.raises(MainJobError, match="calibration request 1 failed: HTTP 500: boom"):
        run_main_job(settings(tmp_path, stretch_windows=True), target, lambda _: None)
    assert target.log[-1] == "stop"  # stopped whatever happened


@given(st.lists(st.floats(1, 1e6), min_size=1, max_size=8))
def test_a_calibrated_slo_is_a_multiple_of_100_ms_under_the_ceiling(ttfab):
    slo = calibrated_slo_ms(ttfab)
    assert slo % 100 == 0 and 0 < slo <= MAX_LOCAL_SLO_MS


@given(st.lists(st.floats(1, 120_000), min_size=1, max_size=8))
def test_stretched_windows_fit_three_requests_and_keep_the_lead_in(latency_ms):
    base = LadderSchedule((1, 2), 30.0, 20.0, 2.0)
    longer = stretched(base, latency_ms)
    assert longer.measure_s >= min(base.measure_s, 3 * max(latency_ms) / 1000) - 0.5
    assert longer.hold_s - longer.measure_s >= base.hold_s - base.measure_s - 1
