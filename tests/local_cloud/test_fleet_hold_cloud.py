"""The fleet rule's verification level held end to end on a local cloud compressed 30-fold.

`qmax --endpoint … --curve-check` through one curve instance from the reference ladder: the
ladder, then the verification holds the plan's threshold levels and the fleet rule's level, the
last until two whole minutes of the cloud's clock lie in its hold (three of its minutes are six
wall seconds here), and joins CloudWatch on that clock. The chain (`tests/chain`) runs its ladder
with `--no-fleet-level`, since on its uncompressed clock this hold is three real minutes; what it
checked of the fleet level is checked here. Everything asserted is on the cloud's clock or a
count (minutes, ratios): a slow machine stretches the wall clock, not these.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REFERENCE_QMAX, REFERENCE_TTOTAL
from tests.servers import as_a_client_of_the_cloud
from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.cli import main
from tts_bench.local_cloud import LocalCloud, LocalCloudSettings, local_cloud
from tts_bench.local_cloud.settings import CurveInstances
from tts_bench.measure.ladder.live.cloudwatch_join import (
    MIN_INVOCATION_MINUTES,
    cloud_window,
    whole_minutes,
)
from tts_bench.planning.fleet_rule import invocations_units

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "ladder" / "corpora" / "short.txt"
TIME_SCALE = 30.0
RATE_SCALE = 1.0
# A curve instance's request stands for RATE_SCALE × TIME_SCALE of the fleet it models
# (`local_cloud/cloudwatch/metrics.py`): that is what InvocationsPerInstance counts per request.
REQUEST_WEIGHT = RATE_SCALE * TIME_SCALE
# Deterministic service on the reference curve: TTFAB about 65 ms at 1 user, 170 at 3, 340 at 6.
# A loaded machine only adds to them, so c=6 always fails; Q_max may drop to 1, and nothing
# below depends on which Q_max the ladder found.
SLO_MS = "260"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    settings = LocalCloudSettings(
        curve=CurveInstances(
            qmax=REFERENCE_QMAX,
            ttotal=REFERENCE_TTOTAL,
            rate_scale=RATE_SCALE,
            service="deterministic",
            seed=5,
        ),
        time_scale=TIME_SCALE,
        instances=1,
    )
    with pytest.MonkeyPatch.context() as patch, local_cloud(settings) as started:
        as_a_client_of_the_cloud(patch, started.env, tmp_path_factory.mktemp("state"))
        yield started


@pytest.fixture(scope="module")
def ladder(cloud: LocalCloud, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ladder rungs of 3 wall seconds (90 s of the cloud's: no two whole minutes), so the fleet
    level is always held on its own; the metric wait is wall seconds, ample for a 5 s delay of
    the cloud's clock. Windows this short decide no rung on its p95 interval: the verification
    holds levels of the point Q_max."""
    out = tmp_path_factory.mktemp("measurements")
    code = main(
        [
            "qmax", "--endpoint", cloud.endpoint_name, "--variant", cloud.variant_name,
            "--transport", "response-stream", "--curve-check", "--rungs", "1,3,6", "--hold-s", "3",
            "--measure-s", "2", "--idle-s", "0", "--slo-ms", SLO_MS, "--corpus", str(CORPUS),
            "--out", str(out), "--metric-wait-s", "30", "--q-max-basis", "point",
        ]
    )  # fmt: skip
    assert code == 0
    (path,) = out.glob("qmax-*.json")
    return path


def test_the_fleet_level_is_held_for_two_whole_minutes_of_the_clouds_clock(
    ladder: Path,
) -> None:
    qmax = load_artifact(ladder, QmaxArtifact)
    assert qmax.provenance.kind == "simulated" and not qmax.fleet_level_skipped
    assert qmax.ladder is not None and qmax.ladder.time_scale == TIME_SCALE
    fleets = [v for v in qmax.verification if v.role == "fleet"]
    # None: CloudWatch gave the level no reading in its hold (its points on another clock).
    assert len(fleets) == 1, qmax.verification
    (fleet,) = fleets
    assert fleet.source == "held", qmax.verification
    held = qmax.verification_ladder
    assert held is not None and held.time_scale == TIME_SCALE
    index = held.rungs.index(fleet.concurrency)
    # Minutes counted on the cloud's clock, where its hold was fitted to them when it started;
    # a late machine only holds the rung longer, never fewer minutes.
    assert whole_minutes(*cloud_window(held, index, whole_hold=True)) >= MIN_INVOCATION_MINUTES
    # Every request the client sent in those minutes, counted once by the cloud (at its weight).
    # A slow machine delays arrivals behind starts at both ends of the minutes alike, a request
    # or two of about 70: the bound is the chain's.
    counted = fleet.cloudwatch_ratios[INVOCATIONS_RATIO_STAT.key] / REQUEST_WEIGHT
    assert 0.9 <= counted <= 1.1, fleet
    # The cloud's 10 s Maximum in flight over the client's mean, the same requests: a slow
    # client's gaps between requests lower only its mean, by their share of a ~60 ms request;
    # 1.00 here beside two burners (scripts/flake-check), the chain's bound.
    for v in qmax.verification:
        assert 0.8 <= v.cloudwatch_ratios["Maximum/10s"] <= 1.25, v
    # No ladder rung held two whole minutes: the plan's target takes the fleet rung's ratio.
    units, _ = invocations_units(qmax)
    assert units.ratio_rule == "smallest-rung"
    assert units.cw_ratio == fleet.cloudwatch_ratios[INVOCATIONS_RATIO_STAT.key]


def test_verify_recomputes_the_fleet_rung_from_the_reads_kept(
    ladder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(ladder)]) == 0, capsys.readouterr().out
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("ok ") and "CloudWatch ratios from the reads kept" in line, line
