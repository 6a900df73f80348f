"""A curve instance's rules from the reference artifacts: service rate, first chunk, start-up."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.core.ladders import qmax_artifact, rung
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import RefusalError
from tts_bench.local_cloud.instances.curve_instance import CurveQueue
from tts_bench.local_cloud.instances.curve_model import CurveModel, StartupTimeline
from tts_bench.planning.curve import Curve, throughput_curve


@pytest.fixture(scope="module")
def reference_qmax(reference_qmax_path) -> QmaxArtifact:
    return load_artifact(reference_qmax_path, QmaxArtifact)


@pytest.fixture(scope="module")
def reference_ttotal(reference_ttotal_path) -> TtotalArtifact:
    return load_artifact(reference_ttotal_path, TtotalArtifact)


@given(scale=st.floats(0.1, 100.0), occupancy=st.integers(0, 80))
def test_rate_is_the_plans_interpolated_curve_divided_by_the_rate_scale(
    reference_qmax: QmaxArtifact, scale: float, occupancy: int
) -> None:
    model = CurveModel.from_qmax(reference_qmax, rate_scale=scale)
    expected = throughput_curve(reference_qmax.rungs)(float(occupancy)) / scale
    assert math.isclose(model.rate_rps(occupancy), expected, rel_tol=1e-12)
    # The first chunk is the c=1 rung's median TTFAB, stretched by the same scale.
    assert math.isclose(model.first_chunk_after_s, 0.06002 * scale, rel_tol=1e-9)


def test_deterministic_service_is_one_over_the_rate_and_exponential_has_that_mean(
    reference_qmax: QmaxArtifact,
) -> None:
    fixed = CurveModel.from_qmax(reference_qmax, 2.0, "deterministic")
    assert math.isclose(fixed.service_s(5, 0.3), 2.0 / 17.9, rel_tol=1e-12)
    random = CurveModel.from_qmax(reference_qmax, 2.0, "exponential")
    draws = np.random.default_rng(7).standard_exponential(20_000)
    times = np.array([random.service_s(5, d) for d in draws])
    standard_error = times.std() / math.sqrt(times.size)
    assert abs(times.mean() - 2.0 / 17.9) < 4 * standard_error
    assert fixed.service_s(0, 1.0) == math.inf  # nobody to serve


def test_a_ladder_without_a_c1_rung_or_a_bad_scale_is_refused() -> None:
    with pytest.raises(RefusalError, match="no usable c=1 rung"):
        CurveModel.from_qmax(qmax_artifact([rung(2, 10.0, 200.0), rung(4, 12.0, 400.0)]))
    with pytest.raises(RefusalError, match="--rate-scale"):
        CurveModel(Curve((0.0, 1.0), (0.0, 10.0)), 0.05, rate_scale=0.0)


def test_start_up_follows_the_ttotal_stages(reference_ttotal: TtotalArtifact) -> None:
    timeline = StartupTimeline.from_ttotal(reference_ttotal)
    assert timeline.provisioning_s == 180.8
    steps = [(s.event, round(s.at_s, 3)) for s in timeline.steps]
    assert steps == [
        ("container_started", 3.7),
        ("framework_init", 3.7),
        ("weights_ready", 10.2),
        ("warmup_done", 11.2),
        ("ready", 11.2),
        ("in_service", 31.9),
    ]
    # Desired to in service is the sum of the measured stages between them.
    between = [s.seconds for s in reference_ttotal.stages if s.counted][:-1]  # not recovery
    assert math.isclose(timeline.provisioning_s + timeline.in_service_s, sum(between))


def test_a_ttotal_without_a_scale_out_is_refused(reference_ttotal: TtotalArtifact) -> None:
    data = reference_ttotal.model_dump(mode="json")
    data["stages"][1]["name"] = "desired_set -> process_spawned"
    with pytest.raises(RefusalError, match="do not start desired_set -> instance_visible"):
        StartupTimeline.from_ttotal(TtotalArtifact.model_validate(data))


def _flat(rate: float, law: str) -> CurveModel:
    return CurveModel(Curve((0.0, 1.0), (0.0, rate)), first_chunk_s=0.01, service=law)  # type: ignore[arg-type]


def test_the_queue_serves_in_arrival_order_one_at_a_time() -> None:
    """Deterministic law at 20/s: three requests joined at once start one after another, each
    when the one before it finishes, 50 ms apart (plus the loop's timer lag)."""

    async def run() -> tuple[list[float], list[float]]:
        queue = CurveQueue(_flat(20.0, "deterministic"), np.random.default_rng(1))
        loop = asyncio.get_running_loop()
        jobs = [queue.join() for _ in range(3)]
        finished = []
        for job in jobs:
            await job.finished
            finished.append(loop.time())
        return [await j.started for j in jobs], finished

    started, finished = asyncio.run(run())
    assert started[1:] == pytest.approx(finished[:-1], abs=0.005)  # the next starts at once
    gaps = np.diff([started[0], *finished])
    assert all(0.049 <= g < 0.08 for g in gaps), gaps


def test_a_request_that_leaves_frees_the_head_at_once() -> None:
    async def run() -> float:
        queue = CurveQueue(_flat(1.0, "deterministic"), np.random.default_rng(1))
        loop = asyncio.get_running_loop()
        first, second = queue.join(), queue.join()
        began = loop.time()
        queue.leave(first)  # its client went away
        assert first.finished.cancelled() and queue.occupancy == 1
        return await second.started - began

    assert asyncio.run(run()) < 0.01


def test_a_cancelled_handler_frees_its_place_and_the_queue_goes_on() -> None:
    """A handler cancelled while it awaits its finish (the client closed the stream) has its
    future cancelled under it; leaving must still take it out, and the next request starts."""

    async def run() -> float:
        queue = CurveQueue(_flat(1.0, "deterministic"), np.random.default_rng(1))
        loop = asyncio.get_running_loop()
        first = queue.join()

        async def handler() -> None:
            try:
                await first.finished
            finally:
                queue.leave(first)

        task = asyncio.create_task(handler())
        second = queue.join()
        await asyncio.sleep(0.01)
        began = loop.time()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return await asyncio.wait_for(second.started, timeout=2) - began

    assert asyncio.run(run()) < 0.01


def test_exponential_service_is_redrawn_at_the_new_occupancys_rate() -> None:
    """X(1) = 0.001/s and X(2) = 1000/s: alone, the head would take about 1000 s; a second
    arrival redraws its finish at X(2), as the chain's memoryless exponential allows."""

    async def run() -> float:
        model = CurveModel(Curve((0.0, 1.0, 2.0), (0.0, 0.001, 1000.0)), first_chunk_s=0.0)
        queue = CurveQueue(model, np.random.default_rng(5))
        loop = asyncio.get_running_loop()
        first = queue.join()
        await asyncio.sleep(0.05)
        assert not first.finished.done()
        began = loop.time()
        queue.join()
        await asyncio.wait_for(first.finished, timeout=5)
        return loop.time() - began

    assert asyncio.run(run()) < 1.0


async def _one_stream(model: CurveModel, bound: int | None) -> tuple[list[tuple[str, float]], int]:
    """One request to a ready curve instance's app: each line's type with its seconds since the
    send, and the requests still in flight once the stream ended."""
    from aiohttp.test_utils import TestClient, TestServer

    from tts_bench.local_cloud.instances.curve_instance import (
        CurveIdentity,
        CurveState,
        create_curve_app,
    )

    identity = CurveIdentity("m", "ml.g5.xlarge", "sha256:" + "0" * 64, {}, 1.0)
    state = CurveState(model, identity, CurveQueue(model, np.random.default_rng(1)), bound)
    state.status = "ready"
    async with TestClient(TestServer(create_curve_app(state))) as client:
        loop = asyncio.get_running_loop()
        began = loop.time()
        response = await client.post("/invocations", json={"context_id": "c", "transcript": "t"})
        events = [
            (line.split(b'"type":"')[1].split(b'"')[0].decode(), loop.time() - began)
            async for line in response.content
        ]
        return events, state.in_flight


def test_a_request_the_chain_finishes_before_its_first_chunk_is_due_leaves_then() -> None:
    """The first chunk is part of the service: a request never stays in flight (nor holds an
    admission slot) after the chain finished it, as it cannot in the simulator."""
    # 100 requests/s (10 ms) against a first chunk due after 5 s
    model = CurveModel(
        Curve((1.0, 2.0), (100.0, 100.0)), first_chunk_s=5.0, service="deterministic"
    )
    events, in_flight = asyncio.run(_one_stream(model, 1))
    assert [kind for kind, _ in events] == ["chunk", "done"] and in_flight == 0
    assert events[-1][1] < 1.0  # not the 5 s the first chunk would otherwise have waited


def test_a_connection_closing_before_the_first_chunk_frees_the_queue_without_an_error() -> None:
    """Issue 40's soak: a connection already closing when the first chunk was due (its instance
    stopping, or its client gone) left an 'Error handling request' traceback in the cloud's log.
    As in the container, that is a client gone: the handler answers quietly, the queue goes on."""
    from unittest import mock

    from aiohttp.http_writer import StreamWriter
    from aiohttp.test_utils import make_mocked_request

    from tts_bench.local_cloud.instances.curve_instance import CurveIdentity, CurveState, _serve

    model = CurveModel(Curve((1.0, 2.0), (1.0, 1.0)), first_chunk_s=0.05, service="deterministic")
    identity = CurveIdentity("m", "ml.g5.xlarge", "sha256:" + "0" * 64, {}, 1.0)

    async def serve_on_a_closing_connection() -> tuple[int, CurveState]:
        state = CurveState(model, identity, CurveQueue(model, np.random.default_rng(1)), 1)
        protocol = mock.Mock(transport=mock.Mock(is_closing=lambda: True))
        writer = StreamWriter(protocol, asyncio.get_running_loop())
        request = make_mocked_request("POST", "/invocations", writer=writer, protocol=protocol)
        response = await _serve(request, state, {"context_id": "c", "transcript": "t"})
        return response.status, state

    status, state = asyncio.run(serve_on_a_closing_connection())
    assert status in (200, 499)  # whatever it had begun; aiohttp sends nothing more
    assert state.queue.occupancy == 0


def test_a_two_chunk_stream_sends_its_second_chunk_when_the_chain_finishes_it() -> None:
    """Playback's tests need a stream that can stall: the second chunk leaves with the
    request's service (100 ms here), long after the first (1 ms) has played its 20 ms."""
    curve = Curve((1.0, 2.0), (10.0, 10.0))
    two, _ = asyncio.run(
        _one_stream(CurveModel(curve, 0.001, service="deterministic", chunks=2), None)
    )
    assert [kind for kind, _ in two] == ["chunk", "chunk", "done"]
    assert two[1][1] >= 0.099  # a sleep only runs late: never before the 100 ms service ends
    one, _ = asyncio.run(_one_stream(CurveModel(curve, 0.001, service="deterministic"), None))
    assert [kind for kind, _ in one] == ["chunk", "done"]
    with pytest.raises(ValueError, match="chunks 3"):
        CurveModel(curve, 0.001, chunks=3)  # type: ignore[arg-type]
