"""`tts-bench surge` against a real server bounded at the ladder's Q_max (open loop, Poisson).

The qmax artifact is the session's real two-rung ladder (Q_max 2, X(2) measured); the surge
runs against a second server started with MAX_QUEUE_DEPTH=2, one module-scoped process.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.schema import QmaxArtifact, load_artifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.errors import RefusalError
from tts_bench.measure.corpus import load_corpus
from tts_bench.measure.samples import Outcome, read_samples, samples_path
from tts_bench.measure.surge_figures import (
    fluid_shed_share,
    occupancy_at,
    poisson_arrivals,
    run_samples,
    surge_run,
)
from tts_bench.measure.surge_run import SurgeRequest, measure_surge

from .conftest import CORPORA

pytestmark = pytest.mark.slow

LOW_RPS, LOW_S, LOW_SEED = 0.1, 30.0, 3
HIGH_S = 15.0
# The surge server may run faster than the ladder's (the machine is shared, loads move):
# the lower bound on shedding grants it up to this much more capacity than X(Q_max).
CAPACITY_SLACK = 1.5


@pytest.fixture(scope="module")
def bounded_server(child_env, http_ladder, tmp_path_factory: pytest.TempPathFactory):
    from tts_bench.measure.local_server import LocalServer

    q_max = load_artifact(http_ladder, QmaxArtifact).q_max
    assert q_max is not None, "the session's ladder found no Q_max to bound the server at"
    env = {**child_env, "MAX_QUEUE_DEPTH": str(q_max)}
    log = tmp_path_factory.mktemp("bounded") / "server.log"
    with LocalServer(env=env, log_path=log) as server:
        server.wait_ready(timeout_s=600)
        yield server


@pytest.fixture(scope="module")
def surged(bounded_server, http_ladder, tmp_path_factory: pytest.TempPathFactory):
    qmax = load_artifact(http_ladder, QmaxArtifact)
    x_q_max = qmax.rung(qmax.q_max).achieved_rps
    high = round(6 * x_q_max, 3)  # six times what the instance serves at its bound
    request = SurgeRequest(
        qmax_path=http_ladder, qmax=qmax, rates_rps=[LOW_RPS], duration_s=LOW_S,
        transport=Transport.LOCAL_HTTP, utterances=load_corpus(CORPORA / "short.txt"),
        seed=LOW_SEED,
    )  # fmt: skip
    # Two artifacts (two directories), so each rate keeps its own duration.
    out = tmp_path_factory.mktemp("surge")
    low = measure_surge(request, bounded_server.url, out / "low", lambda _: None)
    high_request = dataclasses.replace(
        request, rates_rps=[high], duration_s=HIGH_S, seed=LOW_SEED + 1
    )
    high_written = measure_surge(high_request, bounded_server.url, out / "high", lambda _: None)
    return qmax, low, high_written


def test_a_rate_well_below_capacity_sheds_nothing(surged):
    qmax, low, _ = surged
    (run,) = low.artifact.runs
    offsets = poisson_arrivals(LOW_RPS, LOW_S, LOW_SEED)
    # The fixed schedule never puts Q_max + 1 = 3 arrivals within 8 s of each other, far more
    # than a short request takes: any shed request would be a gate that refused with room.
    triples = [offsets[i + 2] - offsets[i] for i in range(len(offsets) - 2)]
    assert len(offsets) >= 3 and min(triples) >= 8.0
    assert run.arrivals == len(offsets)
    assert (run.shed, run.shed_share, run.errors) == (0, 0.0, 0)
    assert run.ok == run.arrivals and run.max_occupancy <= qmax.q_max
    assert run.prediction.shed_share < 0.05  # the model agrees: nearly nothing to shed


def test_a_rate_well_above_capacity_sheds_the_excess(surged):
    """Tolerance: over S seconds a full instance completes about X(Q_max)·S requests and
    holds Q_max more, so at most X·S + Q_max of N arrivals get in: shed ≥ 1 − (X·S + Q)/N.
    X is the ladder's, granted CAPACITY_SLACK for a faster moment of the shared machine.
    The other side is exact: no arrival is shed while the instance visibly had room (fewer
    than Q_max − 1 admitted requests in flight when it was sent, one allowed for the instants
    between the server freeing a place and the client seeing the stream end)."""
    qmax, _, high = surged
    (run,) = high.artifact.runs
    x_q_max = qmax.rung(qmax.q_max).achieved_rps
    floor = fluid_shed_share(CAPACITY_SLACK * x_q_max, qmax.q_max, run.rate_rps, HIGH_S)
    assert floor > 0.4
    assert run.shed_share >= floor - 3 / np.sqrt(run.arrivals)  # and Poisson noise in N
    samples = run_samples(read_samples(high.samples_path), run.start_epoch, HIGH_S)
    shed = [s for s in samples if s.outcome is Outcome.REJECTED]
    in_flight_then = occupancy_at(samples, np.array([s.start for s in shed]))
    assert all(n >= qmax.q_max - 1 for n in in_flight_then), in_flight_then
    assert run.reached_q_max and run.prediction.shed_share > 0.4


def test_latency_from_the_intended_send_time_is_never_below_the_send_time_latency(surged):
    _, low, high = surged
    for written in (low, high):
        samples = read_samples(samples_path(written.path))
        assert samples and all(s.intended_start is not None for s in samples)
        for s in samples:
            assert s.start >= s.intended_start
            if s.ttfab_ms is not None:
                assert s.intended_ttfab_ms >= s.ttfab_ms


def test_the_surge_artifact_recomputes_from_its_samples(surged):
    qmax, low, high = surged
    for written in (low, high):
        artifact = SurgeArtifact.model_validate_json(written.path.read_text())
        assert artifact == written.artifact and written.png.stat().st_size > 0
        samples = read_samples(samples_path(written.path))
        for run in artifact.runs:
            again = surge_run(
                samples, qmax, run.rate_rps, run.duration_s, run.seed, run.start_epoch
            )
            assert again == run


def test_a_server_without_the_ladders_bound_is_refused(live_server, http_ladder, tmp_path):
    qmax = load_artifact(http_ladder, QmaxArtifact)
    request = SurgeRequest(
        qmax_path=http_ladder, qmax=qmax, rates_rps=[1.0], duration_s=1.0,
        transport=Transport.LOCAL_HTTP, utterances=load_corpus(CORPORA / "short.txt"), seed=1,
    )  # fmt: skip
    with pytest.raises(RefusalError, match="admission bound is None"):
        measure_surge(request, live_server.url, tmp_path, lambda _: None)
