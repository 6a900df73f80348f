"""`tts-bench surge` against a real server bounded at the ladder's Q_max (open loop, Poisson).

The qmax artifact is the session's calibrated, refined ladder (conftest `refined_ladder`);
the surge runs against a second server started with MAX_QUEUE_DEPTH = its refined Q_max, one
module-scoped process. Rates and durations scale with the lone-request latency measured with
the ladder, so the runs mean the same on an idle CI machine and on a busy shared one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.errors import RefusalError
from tts_bench.measure.corpus import load_corpus
from tts_bench.measure.samples import Outcome, read_samples, samples_path
from tts_bench.measure.surge.figures import (
    fluid_shed_share,
    occupancy_at,
    poisson_arrivals,
    run_samples,
    surge_run,
)
from tts_bench.measure.surge.run import SurgeRequest, measure_surge
from tts_bench.planning.curve import throughput_curve

from .conftest import CORPORA

pytestmark = pytest.mark.slow

CORPUS = CORPORA / "two_sentences.txt"  # the ladder's, so X(n) describes the same work
# The surge server may run faster than the ladder's did (the machine is shared, loads move):
# the lower bound on shedding grants it up to this much more capacity than X(Q_max).
CAPACITY_SLACK = 1.5
HIGH_MULTIPLE = 6.0  # the high rate, as a multiple of X(Q_max)


def quiet_schedule(q_max: int, lone_s: float, x_q_max: float) -> tuple[float, float, int]:
    """(rate, duration, seed) of a run with at least 3 arrivals, at most 0.45 X(Q_max), where no
    Q_max + 1 of them fall within 3 lone-request latencies: shedding one would mean the gate
    refused with room. (On a loaded machine the ladder's X(Q_max) can sit below 1 / lone.)"""
    duration = max(30.0, 8 * lone_s, 3 / (0.45 * x_q_max))
    rate = 3 / duration
    for seed in range(1, 2000):
        times = poisson_arrivals(rate, duration, seed)
        spans = times[q_max:] - times[: len(times) - q_max]
        if len(times) >= 3 and spans.min() >= 3 * lone_s:
            return rate, duration, seed
    raise AssertionError("no seed gives a quiet schedule")


@pytest.fixture(scope="module")
def ladder(refined_ladder) -> QmaxArtifact:
    return load_artifact(refined_ladder.path, QmaxArtifact)


@pytest.fixture(scope="module")
def bounded_server(child_env, ladder, tmp_path_factory: pytest.TempPathFactory):
    from tts_bench.serving.local_server import LocalServer

    env = {**child_env, "MAX_QUEUE_DEPTH": str(ladder.refined_q_max)}
    log = tmp_path_factory.mktemp("bounded") / "server.log"
    with LocalServer(env=env, log_path=log) as server:
        server.wait_ready(timeout_s=600)
        yield server


@pytest.fixture(scope="module")
def surged(bounded_server, ladder, refined_ladder, tmp_path_factory: pytest.TempPathFactory):
    q_max = ladder.refined_q_max
    x_q_max = throughput_curve(ladder.curve_rungs)(q_max)
    rate, duration, seed = quiet_schedule(q_max, refined_ladder.lone_latency_s, x_q_max)
    low = SurgeRequest(
        qmax_path=refined_ladder.path, qmax=ladder, rates_rps=[rate], duration_s=duration,
        transport=Transport.LOCAL_HTTP, utterances=load_corpus(CORPUS), seed=seed,
    )  # fmt: skip
    high = dataclasses.replace(
        low,
        rates_rps=[round(HIGH_MULTIPLE * x_q_max, 4)],
        duration_s=max(15.0, 3 * refined_ladder.lone_latency_s),
        seed=1,
    )
    out = tmp_path_factory.mktemp("surge")  # one directory per rate: each its own artifact
    url = bounded_server.url
    return (
        measure_surge(low, url, out / "low", lambda _: None),
        measure_surge(high, url, out / "high", lambda _: None),
        x_q_max,
    )


def test_a_rate_well_below_capacity_sheds_nothing(surged, ladder):
    low, _, x_q_max = surged
    (run,) = low.artifact.runs
    assert run.rate_rps < 0.5 * x_q_max  # "well below" holds for the measured curve too
    assert run.arrivals == len(poisson_arrivals(run.rate_rps, run.duration_s, run.seed)) >= 3
    assert (run.shed, run.shed_share, run.errors) == (0, 0.0, 0)
    assert run.ok == run.arrivals


def test_a_rate_well_above_capacity_sheds_the_excess(surged, ladder):
    """Tolerance: over S seconds a full instance completes about X(Q_max)·S requests and
    holds Q_max more, so at most X·S + Q_max of N arrivals get in: shed ≥ 1 − (X·S + Q)/N.
    X is the ladder's, granted CAPACITY_SLACK for a faster moment of the shared machine, and
    N is Poisson (3/√N). The other side is exact: no arrival is shed while the instance
    visibly had room (fewer than Q_max − 1 admitted requests in flight when it was sent, one
    allowed for the instants between the server freeing a place and the client seeing it)."""
    _, high, x_q_max = surged
    (run,) = high.artifact.runs
    q_max = ladder.refined_q_max
    floor = fluid_shed_share(CAPACITY_SLACK * x_q_max, q_max, run.rate_rps, run.duration_s)
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


def test_a_server_without_the_ladders_bound_is_refused(server, ladder, refined_ladder, tmp_path):
    request = SurgeRequest(
        qmax_path=refined_ladder.path, qmax=ladder, rates_rps=[1.0], duration_s=1.0,
        transport=Transport.LOCAL_HTTP, utterances=load_corpus(CORPUS), seed=1,
    )  # fmt: skip
    with pytest.raises(RefusalError, match="admission bound is None"):
        measure_surge(request, server.url, tmp_path, lambda _: None)
