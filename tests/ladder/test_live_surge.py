"""`tts-bench surge` against a serial curve instance bounded at the ladder's Q_max (open loop,
Poisson).

The instance serves one request at a time, each in exactly 1 / RATE_RPS (deterministic
service), and admits Q_MAX at once (its MAX_QUEUE_DEPTH), one module-scoped instance on
loopback. The qmax artifact is written from what that instance is, X(n) = RATE_RPS and Q_max
Q_MAX, with its fingerprint: a measured ladder of a serial instance would find Q_max 1 or 2
(the session's refined ladder: 1), where the surge's check that nothing is shed with room
(fewer than Q_max - 1 in flight) could not fail. A sleep only runs late, so the instance is
never faster than RATE_RPS: the shedding bound needs no slack for a faster moment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.core.ladders import qmax_artifact, rung
from tts_bench.artifacts.files import write_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.errors import RefusalError
from tts_bench.local_cloud.instances.serial_curve import serial_curve
from tts_bench.measure.corpus import load_corpus
from tts_bench.measure.samples import Outcome, read_samples, samples_path
from tts_bench.measure.surge.figures import (
    fluid_shed_share,
    occupancy_at,
    poisson_arrivals,
    run_samples,
    surge_run,
)
from tts_bench.measure.surge.run import SurgeRequest, SurgeWritten, measure_surge
from tts_bench.planning.curve import throughput_curve
from tts_bench.serving.server_ping import fetch_ping

from .conftest import CORPORA

pytestmark = pytest.mark.slow

CORPUS = CORPORA / "two_sentences.txt"
RATE_RPS, Q_MAX = 25.0, 3  # 40 ms a request; up to 3 admitted at once
SERVICE_S = 1 / RATE_RPS
# The quiet run: no Q_MAX + 1 arrivals within QUIET_SPAN_S. The first of them is done at most
# Q_MAX services (120 ms) after it arrived, so shedding the last would take 880 ms of lateness.
# Twice the former rate in half the time: as many arrivals (about 6), the same span.
QUIET_RATE_RPS, QUIET_DURATION_S, QUIET_SPAN_S = 2.0, 3.0, 1.0
# The high rate, as a multiple of X(Q_max), for 2 s: about 200 arrivals, of which at most
# X·S + Q_max = 53 get in, so the floor on the shed share is 0.73 (> 0.3) and its Poisson
# tolerance 3/√200 = 0.21.
HIGH_MULTIPLE, HIGH_DURATION_S = 4.0, 2.0


def quiet_seed() -> int:
    """A seed whose arrivals (at least 3) never put Q_MAX + 1 within QUIET_SPAN_S."""
    for seed in range(1, 2000):
        times = poisson_arrivals(QUIET_RATE_RPS, QUIET_DURATION_S, seed)
        spans = times[Q_MAX:] - times[: len(times) - Q_MAX]
        if len(times) >= 3 and (not spans.size or spans.min() >= QUIET_SPAN_S):
            return seed
    raise AssertionError("no seed gives a quiet schedule")


@pytest.fixture(scope="module")
def bounded_curve() -> Iterator[str]:
    with serial_curve(RATE_RPS, 1.0, seed=1, bound=Q_MAX, service="deterministic") as url:
        yield url


@pytest.fixture(scope="module")
def ladder_path(bounded_curve: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The instance's ladder as arithmetic has it: c=1..Q_MAX pass at RATE_RPS, Q_MAX + 1 fails
    (its TTFAB waits n - 1 services of 40 ms; the SLO 100 ms lies between c=3's and c=4's)."""
    fingerprint = fetch_ping(bounded_curve).fingerprint(Transport.LOCAL_HTTP)
    rungs = [rung(n, RATE_RPS, 1 + 1000 * SERVICE_S * (n - 1), slo_ms=100) for n in range(1, 5)]
    artifact = qmax_artifact(rungs, slo_ms=100, fingerprint=fingerprint)
    assert (artifact.q_max, artifact.refined_q_max, artifact.bracketed) == (Q_MAX, Q_MAX, True)
    return write_artifact(artifact, tmp_path_factory.mktemp("ladder"), "qmax-curve.json")


@pytest.fixture(scope="module")
def ladder(ladder_path: Path) -> QmaxArtifact:
    return QmaxArtifact.model_validate_json(ladder_path.read_text())


@pytest.fixture(scope="module")
def surged(
    bounded_curve: str, ladder: QmaxArtifact, ladder_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[SurgeWritten, SurgeWritten, float]:  # fmt: skip
    x_q_max = throughput_curve(ladder.curve_rungs)(Q_MAX)
    low = SurgeRequest(
        qmax_path=ladder_path, qmax=ladder, rates_rps=[QUIET_RATE_RPS],
        duration_s=QUIET_DURATION_S, transport=Transport.LOCAL_HTTP,
        utterances=load_corpus(CORPUS), seed=quiet_seed(),
    )  # fmt: skip
    high = dataclasses.replace(
        low, rates_rps=[HIGH_MULTIPLE * x_q_max], duration_s=HIGH_DURATION_S, seed=1
    )
    out = tmp_path_factory.mktemp("surge")  # one directory per rate: each its own artifact
    return (
        measure_surge(low, bounded_curve, out / "low", lambda _: None),
        measure_surge(high, bounded_curve, out / "high", lambda _: None),
        x_q_max,
    )


def test_a_surge_on_a_curve_instance_is_recorded_simulated_not_measured(surged):
    for written in surged[:2]:
        provenance = written.artifact.provenance
        assert provenance.kind == "simulated" and "no engine was measured" in provenance.notes


def test_a_rate_well_below_capacity_sheds_nothing(surged, ladder):
    low, _, x_q_max = surged
    (run,) = low.artifact.runs
    assert run.rate_rps < 0.5 * x_q_max  # "well below" holds for the measured curve too
    assert run.arrivals == len(poisson_arrivals(run.rate_rps, run.duration_s, run.seed)) >= 3
    assert (run.shed, run.shed_share, run.errors) == (0, 0.0, 0)
    assert run.ok == run.arrivals


def test_a_rate_well_above_capacity_sheds_the_excess(surged, ladder):
    """Tolerance: over S seconds a full instance completes at most X(Q_max)·S requests and
    holds Q_max more, so at most X·S + Q_max of N arrivals get in: shed ≥ 1 − (X·S + Q)/N.
    X is the instance's own (no faster moment: its sleeps only run late), and N is Poisson
    (3/√N). The other side is exact: no arrival is shed while the instance
    visibly had room (fewer than Q_max − 1 admitted requests in flight when it was sent, one
    allowed for the instants between the server freeing a place and the client seeing it)."""
    _, high, x_q_max = surged
    (run,) = high.artifact.runs
    q_max = ladder.refined_q_max
    floor = fluid_shed_share(x_q_max, q_max, run.rate_rps, run.duration_s)
    assert floor > 0.3
    assert run.shed_share >= floor - 3 / np.sqrt(run.arrivals)
    samples = run_samples(read_samples(high.samples_path), run.start_epoch, run.duration_s)
    shed = [s for s in samples if s.outcome is Outcome.REJECTED]
    in_flight_then = occupancy_at(samples, np.array([s.start for s in shed]))
    assert all(n >= q_max - 1 for n in in_flight_then), in_flight_then
    assert run.reached_q_max and run.prediction.shed_share > 0.3


def test_latency_from_the_intended_send_time_is_never_below_the_send_time_latency(surged):
    for written in surged[:2]:
        samples = read_samples(samples_path(written.path))
        assert samples and all(s.intended_start is not None for s in samples)
        for s in samples:
            assert s.start >= s.intended_start
            if s.ttfab_ms is not None:
                assert s.intended_ttfab_ms >= s.ttfab_ms


def test_the_surge_artifact_recomputes_from_its_samples(surged, ladder):
    for written in surged[:2]:
        artifact = SurgeArtifact.model_validate_json(written.path.read_text())
        assert artifact == written.artifact and written.png.stat().st_size > 0
        samples = read_samples(samples_path(written.path))
        for run in artifact.runs:
            again = surge_run(
                samples, ladder, run.rate_rps, run.duration_s, run.seed, run.start_epoch
            )
            assert again == run


def test_a_server_without_the_ladders_bound_is_refused(
    ladder: QmaxArtifact, ladder_path: Path, tmp_path: Path
) -> None:
    request = SurgeRequest(
        qmax_path=ladder_path, qmax=ladder, rates_rps=[1.0], duration_s=1.0,
        transport=Transport.LOCAL_HTTP, utterances=load_corpus(CORPUS), seed=1,
    )  # fmt: skip
    with (
        serial_curve(RATE_RPS, 1.0, seed=2) as unbounded,
        pytest.raises(RefusalError, match="admission bound is None"),
    ):
        measure_surge(request, unbounded, tmp_path, lambda _: None)
