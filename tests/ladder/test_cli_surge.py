"""`tts-bench surge` and `qmax --refine/--underrun-slo`: bad input is one line and exit 2,
before any server is started or reached."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tts_bench.cli import main

from .test_refine import rung


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*_a, **_kw):
        raise AssertionError("a refused command touched the network or started a process")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def ladder(tmp_path):
    """A valid, unfingerprinted qmax artifact with no Q_max (c=1 failed)."""
    from tts_bench.artifacts.provenance import Provenance
    from tts_bench.measure.ladder.schedule import LadderSchedule
    from tts_bench.measure.ladder.statistics import build_qmax_artifact

    artifact = build_qmax_artifact(
        [rung(1, False)], None, LadderSchedule((1,), 10, 5, 1), 3000.0,
        Provenance.now("measured", "test"),
    )  # fmt: skip
    path = tmp_path / "qmax.json"
    path.write_text(artifact.model_dump_json())
    return path


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--rate", "nan"], "--rate nan: not a finite number"),
        (["--rate", "-1"], "--rate -1.0: requests per second"),
        (["--rate", "1", "--duration-s", "inf"], "--duration-s inf: not a finite number"),
        (["--rate", "1", "--qmax", "/nonexistent.json"], "/nonexistent.json: no such file"),
        (["--rate", "1"], "the ladder found no Q_max"),
        (["--rate", "1", "--transport", "response-stream"], "pass --endpoint NAME"),
        (["--rate", "1", "--transport", "bidi-stream"], "not built over the bidirectional"),
        (["--rate", "1", "--endpoint", "tts"], "local-http is local: an endpoint takes"),
    ],
)
def test_surge_refuses_bad_input_in_one_line(no_network, ladder, capsys, args, expected_error):
    if "--qmax" not in args:
        args = [*args, "--qmax", str(ladder)]
    assert main(["surge", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert expected_error in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--refine", "0"], "--refine 0.0: the precision is a percentage"),
        (["--refine", "nan"], "--refine nan"),
        (["--underrun-slo", "0"], "--underrun-slo 0.0: a share above 0"),
    ],
)
def test_qmax_refuses_bad_refinement_and_underrun_flags(no_network, capsys, args, expected_error):
    assert main(["qmax", "--dry-run", *args]) == 2
    assert expected_error in capsys.readouterr().err


def _endpoint(bound: str | None, fingerprint, status: str = "InService"):
    from tts_bench.measure.sagemaker_target import EndpointTarget

    return EndpointTarget(
        region="us-east-1", endpoint="tts", variant="AllTraffic", status=status, image="img",
        fingerprint=fingerprint, queue_max_depth=bound, desired_instances=1,
        current_instances=1, emulated=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("bound", "status", "other_build", "expected"),
    [
        (None, "InService", False, "sets no admission bound, not the ladder's Q_max 10"),
        ("20", "InService", False, "sets MAX_QUEUE_DEPTH=20, not the ladder's Q_max 10"),
        ("10", "Updating", False, "is Updating, not InService"),
        ("10", "InService", True, "not the build the ladder measured"),
        ("10", "InService", False, None),
    ],
)
def test_an_endpoint_is_surged_only_bounded_at_q_max_and_of_the_ladders_build(
    bound, status, other_build, expected
):
    """Before any freeze: the surge tests the model of one instance bounded at Q_max."""
    from tests.core.ladders import qmax_artifact, serial_ladder
    from tts_bench.artifacts.fingerprint import Transport
    from tts_bench.errors import RefusalError
    from tts_bench.measure.surge.run import check_endpoint

    qmax = qmax_artifact(serial_ladder((1, 5, 10, 40), service_ms=100))  # Q_max 10
    assert qmax.fingerprint is not None
    fingerprint = qmax.fingerprint.model_copy(update={"transport": Transport.RESPONSE_STREAM})
    if other_build:
        fingerprint = fingerprint.model_copy(update={"instance_type": "ml.g6.xlarge"})
    target = _endpoint(bound, fingerprint, status)
    if expected is None:
        assert check_endpoint(target, qmax) == fingerprint
    else:
        with pytest.raises(RefusalError, match=expected):
            check_endpoint(target, qmax)


@pytest.mark.parametrize(
    ("curve_modelled", "curve_check", "expected"),
    [
        (True, False, "Q_max is only ever measured on the real engine"),
        (False, True, "--curve-check: endpoint tts runs no curve instances"),
        (True, True, None),
        (False, False, None),
    ],
)
def test_a_ladder_measures_a_curve_cloud_only_with_curve_check_and_only_that_way(
    curve_modelled: bool, curve_check: bool, expected: str | None
) -> None:
    from dataclasses import replace

    from tests.core.ladders import FINGERPRINT
    from tts_bench.errors import RefusalError

    target = replace(_endpoint(None, FINGERPRINT), curve_modelled=curve_modelled)
    if expected is None:
        target.refuse_curve_check_mismatch(curve_check)
    else:
        with pytest.raises(RefusalError, match=expected):
            target.refuse_curve_check_mismatch(curve_check)
