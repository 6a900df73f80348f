"""Local T_total beside a loaded server, its pairing with a ladder of it, and the plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.ladders import qmax_artifact, rung
from tts_bench.artifacts.files import load_artifact, write_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.cli import main
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.statistics import build_qmax_artifact, rung_statistics
from tts_bench.serving.server_ping import fetch_ping
from tts_bench.telemetry import STARTUP_MARKERS

from .conftest import CORPORA
from .synthetic import closed_loop
from .test_statistics import FP


@pytest.fixture
def server_ladder(server, tmp_path: Path) -> Path:
    """A local-http ladder of the session's server, written with its fingerprint: what `ttotal`
    pairs by (the fingerprint) without holding a Kokoro ladder for it."""
    fingerprint = fetch_ping(server.url).fingerprint(Transport.LOCAL_HTTP)
    rungs = [rung(1, 0.5, 900.0, slo_ms=60_000), rung(2, 0.8, 1800.0, slo_ms=60_000)]
    artifact = qmax_artifact(rungs, slo_ms=60_000, fingerprint=fingerprint)
    return write_artifact(artifact, tmp_path / "ladder", "qmax-server.json")


@pytest.mark.slow
def test_local_ttotal_pairs_with_the_local_ladder(server, server_ladder, tmp_path, capsys):
    code = main(
        [
            "ttotal", "--local", "--qmax", str(server_ladder), "--host", server.url,
            "--corpus", str(CORPORA / "short.txt"), "--out", str(tmp_path), "--probe-concurrency", "1",
        ]
    )  # fmt: skip
    assert code == 0
    (path,) = tmp_path.glob("ttotal-kokoro-82m-local-process-*.json")
    ttotal = load_artifact(path, TtotalArtifact)
    qmax = load_artifact(server_ladder, QmaxArtifact)
    assert ttotal.fingerprint == qmax.fingerprint
    assert ttotal.trigger.value == "local-process"
    names = [s.name for s in ttotal.stages]
    assert names[0] == "load_applied -> process_spawned" and not ttotal.stages[0].counted
    assert names[-1] == "ready -> first_request_served"
    order = [n.split(" -> ")[1] for n in names[1:-1]]
    assert order == [m for m in STARTUP_MARKERS if m in order] and "ready" in order
    assert ttotal.measured_total_s > 0
    assert "T_total" in capsys.readouterr().out
    # `plan` takes the pair: a plan is written, feasible or not, and no pairing refusal (exit 2)
    plan = main(
        [
            "plan", "--qmax", str(server_ladder), "--ttotal", str(path), "--peak-rps", "1",
            "--slo-ms", "60000", "--out", str(tmp_path),
        ]
    )  # fmt: skip
    assert plan in (0, 1) and list(tmp_path.glob("plan-*.json"))


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--qmax", "x.json"], "say where: --endpoint NAME"),
        (["--qmax", "x.json", "--local", "--endpoint", "e"], "not both"),
        (["--endpoint", "e", "--qmax", "{local}"], "needs a ladder measured on it"),
        (["--endpoint", "e", "--qmax", "/nonexistent/q.json"], "no such file"),
        (["--local", "--qmax", "{reference}"], "needs a local ladder"),
        (["--local", "--qmax", "/nonexistent/q.json"], "no such file"),
    ],
)
def test_ttotal_refusals(args, expected_error, reference_qmax_path, capsys):
    local = next(reference_qmax_path.parent.glob("qmax-*-local-http-*.json"))
    args = [a.replace("{reference}", str(reference_qmax_path)) for a in args]
    args = [a.replace("{local}", str(local)) for a in args]
    assert main(["ttotal", *args]) == 2
    err = capsys.readouterr().err
    assert expected_error in err and "Traceback" not in err


def test_report_plots_the_reference_artifacts(reference_qmax_path, reference_ttotal_path, tmp_path):
    import matplotlib.image

    assert (
        main(
            ["report", str(reference_qmax_path), str(reference_ttotal_path), "--out", str(tmp_path)]
        )
        == 0
    )
    for name in (reference_qmax_path, reference_ttotal_path):
        png = tmp_path / (name.stem + ".png")
        height, width, _ = matplotlib.image.imread(png).shape
        assert width >= 1000 and height >= 400


def test_report_plots_failing_and_client_bound_rungs(tmp_path):
    schedule = LadderSchedule((1, 2, 4), hold_s=20, measure_s=10, idle_s=0)
    rungs = [
        rung_statistics(closed_loop(1, 0, 20, 100), [], 1, (10, 20), 1000),
        rung_statistics(closed_loop(2, 20, 40, 100, gap_ms=50), [], 2, (30, 40), 1000),
    ]
    assert not rungs[1].usable
    artifact = build_qmax_artifact(rungs, FP, schedule, 1000, Provenance.now("simulated", "test"))
    path = write_artifact(artifact, tmp_path, "qmax-test.json")
    assert main(["report", str(path)]) == 0
    assert (tmp_path / "qmax-test.png").stat().st_size > 10_000


def test_report_of_a_plan_only_is_an_error(reference_plan_path, tmp_path, capsys):
    assert main(["report", str(reference_plan_path), "--out", str(tmp_path)]) == 2
    assert "nothing plotted" in capsys.readouterr().err
