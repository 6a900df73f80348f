"""The main job's steps against a stand-in target: what the job decides is the job's, whatever
the target (the real targets run in tests/ladder/test_local_run.py and the chain tests)."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.artifacts.files import sha256_file
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.aws.validate import Comparison
from tts_bench.jobs.main_job import (
    MAX_LOCAL_SLO_MS,
    JobSettings,
    MainJobError,
    calibrated_slo_ms,
    calibrated_ttfab_ms,
    report,
    run_main_job,
    stretched,
)
from tts_bench.measure.corpus import Utterance, load_corpus
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ttotal.probe import ProbeSample
from tts_bench.planning.findings import Verdict, slo_feasibility
from tts_bench.planning.from_files import WrittenPlan
from tts_bench.planning.slo_headroom import headroom_covers_a_wait, queueing_headroom_s
from tts_bench.planning.steps import PlanRequest

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
    # 3 × a 400 ms p95 TTFAB is 1200 ms, which leaves 400 ms over one 800 ms request: the SLO
    # is raised to 1600 ms, W_max ≥ S_p95. Three 800 ms requests fit the 10 s window already.
    assert result.slo_ms == 1600.0
    assert result.slo_reason.startswith(
        "W_max ≥ S_p95 over the stand-in's uncontended p95 latency (800 ms), more than 3 × "
    )
    assert target.log == ["start", "ladder 20/10 at 1600", "ttotal", "surge", "stop"]
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


@given(st.lists(st.tuples(st.floats(1, 1e6), st.floats(0, 1e6)), min_size=1, max_size=8))
def test_a_calibrated_slo_is_one_the_plan_accepts_or_is_refused_before_the_ladder(requests):
    """Calibrated, the SLO is judged as `plan` judges it: W_max covers one uncontended request,
    under the ceiling; where no such SLO exists the job refuses in one line."""
    ttfab = [t for t, _ in requests]
    latency = [t + tail for t, tail in requests]  # a request ends after its first byte
    service_p95_s = float(np.percentile(latency, 95)) / 1000
    try:
        slo = calibrated_slo_ms(ttfab, latency)
    except MainJobError as exc:
        assert 2 * service_p95_s * 1000 > MAX_LOCAL_SLO_MS - 100
        assert "past SageMaker's 60 s invocation ceiling" in str(exc) and "\n" not in str(exc)
        return
    assert slo % 100 == 0 and 0 < slo <= MAX_LOCAL_SLO_MS
    w_max_s = queueing_headroom_s(slo, service_p95_s)
    assert headroom_covers_a_wait(w_max_s, service_p95_s)
    assert slo >= min(MAX_LOCAL_SLO_MS, 3 * float(np.percentile(ttfab, 95))) - 1e-6


# Issue 36's report (the local cloud beside other work, load 4–5): the TTFAB multiple alone set
# 5,900 ms while one uncontended request took 6.3 s to finish, and the plan stopped. As p95s.
REPORTED_TTFAB_MS, REPORTED_LATENCY_MS = (1_966.0,), (6_300.0,)
# Recorded on this machine (2 cores) beside two CPU burners, 2026-12-04, `calibrate` against a
# plain onnx server over the shipped corpus.
BURNED_TTFAB_MS = (4_901.0, 3_386.0, 7_952.0, 5_508.0)
BURNED_LATENCY_MS = (4_909.0, 7_182.0, 7_964.0, 11_120.0)


@pytest.mark.parametrize(
    ("ttfab", "latency", "expected_slo_ms"),
    [
        (REPORTED_TTFAB_MS, REPORTED_LATENCY_MS, 12_600.0),
        (BURNED_TTFAB_MS, BURNED_LATENCY_MS, 22_800.0),
    ],
)
def test_on_recorded_slow_figures_the_calibrated_slo_passes_the_plans_own_judgement(
    ttfab, latency, expected_slo_ms
):
    service_p95_s = float(np.percentile(latency, 95)) / 1000
    slo = calibrated_slo_ms(ttfab, latency)
    assert slo == expected_slo_ms
    # The c=1 rung may serve slower than the calibration did; up to twice as slow still plans.
    for rung_p95_s in (service_p95_s, 2 * service_p95_s - 0.05):
        request = PlanRequest(peak_rps=1.0, trough_rps=0.2, slo_ms=slo)
        judged = slo_feasibility(request, queueing_headroom_s(slo, rung_p95_s))
        assert judged.verdict is Verdict.OK, judged.message


def test_the_ttfab_multiple_alone_stopped_the_plan_on_the_reported_figures():
    old_rule = calibrated_ttfab_ms(REPORTED_TTFAB_MS)
    service_p95_s = REPORTED_LATENCY_MS[0] / 1000
    request = PlanRequest(peak_rps=1.0, trough_rps=0.2, slo_ms=old_rule)
    judged = slo_feasibility(request, queueing_headroom_s(old_rule, service_p95_s))
    assert old_rule == 5_900.0 and judged.verdict is Verdict.STOP


def test_a_given_slo_one_request_already_misses_is_refused_before_the_ladder(tmp_path):
    target = StandIn(latency_ms=6_000.0)
    with pytest.raises(MainJobError) as caught:
        run_main_job(
            settings(tmp_path, slo_ms=5_000.0, stretch_windows=True), target, lambda _: None
        )
    assert str(caught.value) == (
        "--slo-ms 5000: one uncontended request takes 6000 ms p95 end to end here, so W_max = "
        "SLO − S_p95 = -1.000 s and the plan would stop; give --slo-ms 12000 or more, or leave "
        "it out to calibrate"
    )
    assert not any(entry.startswith("ladder") for entry in target.log)
    assert target.log[-1] == "stop"


@given(st.lists(st.floats(1, 120_000), min_size=1, max_size=8))
def test_stretched_windows_fit_three_requests_and_keep_the_lead_in(latency_ms):
    base = LadderSchedule((1, 2), 30.0, 20.0, 2.0)
    longer = stretched(base, latency_ms)
    assert longer.measure_s >= min(base.measure_s, 3 * max(latency_ms) / 1000) - 0.5
    assert longer.hold_s - longer.measure_s >= base.hold_s - base.measure_s - 1
