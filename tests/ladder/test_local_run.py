"""The main job end to end: `tts-bench local-run` with its own server (tiny ladder)."""

from __future__ import annotations

import subprocess
import sys

import matplotlib.image
import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.cli import main
from tts_bench.serving.server_ping import PingError, fetch_ping

from .conftest import CORPORA, REPO

pytestmark = pytest.mark.slow


def test_local_run_leaves_artifacts_plots_and_a_page_and_stops_its_server(child_env, tmp_path):
    out = tmp_path / "measurements"
    scratch = tmp_path / "tmp"  # the job's logs outlive it, in $TMPDIR: here, not in /tmp
    scratch.mkdir()
    run = subprocess.run(
        [
            sys.executable, "-m", "tts_bench", "local-run", "--in-process", "--out", str(out),
            "--rungs", "1,2",
            "--hold-s", "11", "--measure-s", "7", "--idle-s", "0", "--surge-s", "10",
            "--corpus", str(CORPORA / "short.txt"),
        ],
        cwd=REPO, env={**child_env, "TMPDIR": str(scratch)}, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    (qmax_path,) = out.glob("qmax-kokoro-82m-local-http-*.json")
    (ttotal_path,) = out.glob("ttotal-kokoro-82m-local-process-*.json")
    qmax = load_artifact(qmax_path, QmaxArtifact)
    ttotal = load_artifact(ttotal_path, TtotalArtifact)
    assert ttotal.fingerprint == qmax.fingerprint
    assert qmax.q_max_basis == "point"  # the job's CPU rungs are too short to decide (issue 38)
    assert "local SLO" in run.stdout and f"{qmax.slo_ms:g} ms" in run.stdout
    if qmax.q_max is not None:  # a plan needs a Q_max; with c=1 failing there is none to plan from
        (plan_path,) = out.glob("plan-kokoro-82m-*.json")
        assert load_artifact(plan_path, PlanArtifact).inputs.q_max == qmax.q_max
    for png in (qmax_path.with_suffix(".png"), ttotal_path.with_suffix(".png")):
        assert matplotlib.image.imread(png).shape[1] >= 1000
    (page,) = out.glob("report-*.html")  # the run's page, its path the job's last word on it
    assert f"report: {page}" in run.stdout and '<section id="ttotal">' in page.read_text()
    assert "qmax: rung 1/2 c=1" in run.stderr  # progress: rung, seconds left, live p95
    assert "server stopped" in run.stderr
    (logs,) = scratch.glob("tts-bench-local-run-*")  # named in the report, kept for reading
    assert f"logs in {logs}" in run.stdout and (logs / "server.log").stat().st_size > 0
    if qmax.q_max is not None:  # the surge check: two rates around X(Q_max), model beside run
        (surge_path,) = out.glob("surge-kokoro-82m-local-http-*.json")
        surge = SurgeArtifact.model_validate_json(surge_path.read_text())
        below, above = surge.runs
        assert below.rate_rps < above.rate_rps and surge.q_max == qmax.refined_q_max
        assert below.duration_s == above.duration_s == 10  # --surge-s, not the 20 s default
        assert "why they differ" in run.stderr
    url = next(line for line in run.stderr.splitlines() if "server ready at" in line).split()[-1]
    with pytest.raises(PingError, match="cannot reach"):
        fetch_ping(url, timeout_s=2)  # the server it started is gone
    # What it wrote is a consistent set, each artifact following from its raw data.
    assert main(["verify", *map(str, sorted(out.glob("*.json")))]) == 0
