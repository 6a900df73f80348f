"""Issue 38's last deliverable: the artifact's Q_max is the conservative value unless the ladder
chose the point one, a plan records which, and the gate lets a point plan scale only a local
image (`tests/infra/test_plan_gate.py` holds the gate's test)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.core.ladders import SOURCES, qmax_artifact, rung, ttotal_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.errors import RefusalError
from tts_bench.measure.ladder.flags import add_ladder_arguments, ladder_arguments, ladder_options
from tts_bench.measure.ladder.quantile_interval import (
    fewest_to_bound_above,
    order_statistic_ranks,
)
from tts_bench.planning.plan import PlanRequest, derive_plan

LEVEL = 0.95
# A serial server: 10 rps flat, p95 600 ms a user, SLO 3000 ms. c=1 and 2 pass on their upper
# ends, c=3 is undecided, c=4 and 5 meet the SLO on their point p95 alone, c=6 fails.
ENDS = [(500, 700), (1100, 1300), (1700, 3100), (2200, 3300), (2900, 3200), (3300, 3900)]


def _ladder(basis: str | None) -> QmaxArtifact:
    rungs = [
        rung(n, 10.0, 600.0 * n, interval=(lo, hi, LEVEL))
        for n, (lo, hi) in zip(range(1, 7), ENDS, strict=True)
    ]
    return qmax_artifact(rungs, confidence=LEVEL, q_max_basis=basis)


def _plan(qmax: QmaxArtifact) -> PlanArtifact:
    return derive_plan(qmax, ttotal_artifact(), PlanRequest(peak_rps=200), SOURCES)


@pytest.mark.parametrize(("basis", "q_max"), [("conservative", 2), ("point", 5), (None, 5)])
def test_the_basis_says_which_q_max_the_artifact_and_its_plan_carry(basis, q_max):
    qmax = _ladder(basis)
    assert (qmax.q_max, qmax.refined_q_max, qmax.coarse_q_max) == (q_max, q_max, 5)
    plan = _plan(qmax)
    assert plan.inputs.q_max == plan.queue_max_depth == q_max
    assert plan.inputs.q_max_basis == basis
    # a plan whose ladder predates the basis serialises as it always did
    assert ("q_max_basis" in plan.inputs.model_dump(mode="json")) == (basis is not None)
    assert ("q_max_basis" in qmax.model_dump(mode="json")) == (basis is not None)
    confidence = next(f for f in plan.findings if f.name == "qmax_confidence")
    said = {"conservative": "the conservative value", "point": "--q-max-basis point"}
    assert said.get(basis, "predates --q-max-basis") in confidence.message


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        ({"q_max": 5}, "q_max=5 disagrees with the rungs (which give 2 on the conservative"),
        ({"q_max_basis": "point"}, "q_max=2 disagrees with the rungs (which give 5 on the point"),
        ({"ladder": None, "q_max_interval": None, "rungs": "plain"}, "only by a ladder with a "),
    ],
)
def test_a_hand_edited_q_max_or_basis_does_not_load(edit, fragment):
    data = _ladder("conservative").model_dump(mode="json")
    if edit.pop("rungs", None):
        for r in data["rungs"]:
            r.update(ttfab_p95_interval=None, verdict=None)
    data.update(edit)
    with pytest.raises(ValidationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        QmaxArtifact.model_validate(data)


def test_no_conservative_q_max_is_refused_naming_the_way_out():
    every_rung_undecided = [(400, None), (900, None), (1700, 3100)]
    rungs = [
        rung(n, 10.0, 600.0 * n, interval=(lo, hi, LEVEL))
        for n, (lo, hi) in zip(range(1, 4), every_rung_undecided, strict=True)
    ]
    qmax = qmax_artifact(rungs, confidence=LEVEL, q_max_basis="conservative")
    assert qmax.q_max is None and qmax.coarse_q_max == 3
    with pytest.raises(RefusalError) as refused:
        _plan(qmax)
    message = str(refused.value)
    assert "no rung passed on its 95% p95 interval (undecided: 1, 2, 3" in message
    assert "the point value is 3" in message and "--max-hold-s" in message
    assert "--q-max-basis point" in message
    from tts_bench.report.ladder_tables import no_q_max_text

    assert "no rung passed on its p95 interval; the point value is 3" in no_q_max_text(qmax)


def _parsed(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_ladder_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize("given", [None, "point", "conservative"])
def test_the_flag_reads_back_and_repeats(given):
    argv = ["--rungs", "1,2", "--slo-ms", "900"]
    argv += [] if given is None else ["--q-max-basis", given]
    options = ladder_options(_parsed(argv))
    assert options.q_max_basis == (given or "conservative")
    again = ladder_arguments(options)
    assert ("--q-max-basis" in again) == (given == "point")
    assert ladder_options(_parsed(again)).q_max_basis == options.q_max_basis


def test_the_locust_child_is_told_the_point_basis_and_only_it():
    from tts_bench.measure.ladder.locust_child import LadderRequest
    from tts_bench.measure.ladder.schedule import LadderSchedule

    def command(**kw: str) -> list[str]:
        schedule = LadderSchedule((1, 5), hold_s=20, measure_s=10)
        request = LadderRequest("http://127.0.0.1:1", schedule, 3000, "local-http", None, "m",
                                Path("out"), **kw)  # fmt: skip
        return request.locust_command()

    told = command(q_max_basis="point")
    assert told[told.index("--q-max-basis") + 1] == "point"
    assert "--q-max-basis" not in command()  # the child's own default is the conservative one


@pytest.mark.parametrize(
    ("basis", "said"), [(None, "at least 72 requests"), ("point", "the point value")]
)
def test_the_dry_run_says_which_q_max_and_what_a_rung_needs_to_pass(basis, said, capsys):
    from tts_bench.cli import main

    argv = ["qmax", "--dry-run", "--rungs", "1,2", "--slo-ms", "3000"]
    assert main(argv + ([] if basis is None else ["--q-max-basis", basis])) == 0
    assert said in capsys.readouterr().out


@given(st.floats(min_value=0.9, max_value=0.999))
def test_the_fewest_requests_to_bound_a_p95_is_where_an_upper_end_first_exists(level):
    fewest = fewest_to_bound_above(0.95, level)
    assert order_statistic_ranks(fewest, 0.95, level)[1] is not None
    assert order_statistic_ranks(fewest - 1, 0.95, level)[1] is None
