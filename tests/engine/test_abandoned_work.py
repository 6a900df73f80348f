"""Nothing of a request runs after its end: a pass whose request went
away (deadline, client gone, cancel) is stopped midway, so the next request does not wait
minutes behind it on a CPU."""

from __future__ import annotations

import asyncio

import pytest
from tts_server.engine import Engine, SynthesisRequest

pytestmark = pytest.mark.slow

# One sentence of about 500 phonemes (one pass), at the slowest speed allowed: on a shared
# 2-core machine a minute or more of model work.
LONG_SENTENCE = " ".join(["the quick brown fox jumps over the lazy dog"] * 11)


async def _consume(engine: Engine, request: SynthesisRequest) -> int:
    return len([segment async for segment in engine.synthesize(request)])


async def _cancel_mid_pass_then_serve_another(engine: Engine) -> tuple[int, int, int]:
    scheduler = engine._require().scheduler  # type: ignore[attr-defined]
    before = engine.segments_synthesised
    long = asyncio.create_task(
        _consume(engine, SynthesisRequest(LONG_SENTENCE, "en", "jf_alpha", speed=0.25))
    )
    async with asyncio.timeout(120):  # G2P, then the pass starts
        while scheduler.running_passes == 0:
            await asyncio.sleep(0.05)
    long.cancel()
    await asyncio.gather(long, return_exceptions=True)
    short = await _consume(engine, SynthesisRequest("Hi.", "en", "jf_alpha"))
    return short, engine.segments_synthesised - before, scheduler.aborted


def test_a_cancelled_request_s_running_pass_is_aborted(onnx_engine, run):
    short_segments, synthesised, aborted = run(_cancel_mid_pass_then_serve_another(onnx_engine))

    assert short_segments == 1
    # Only the short request's segment was synthesised: the long pass never completed.
    assert synthesised == 1
    assert aborted >= 1


@pytest.fixture(scope="module")
def onnx_process_engine(run):
    """The onnx engine with its model in a process of its own (`ENGINE_PROCESS=1`)."""
    from tts_server.engine import create_engine

    engine = create_engine("onnx", "concurrent", process=True)
    run(engine.load())
    yield engine
    run(engine.close())


def test_a_cancelled_request_s_work_ends_in_the_engine_process_too(onnx_process_engine, run):
    """The cancel crosses the socket: the long segment is dropped from the child's queue or its
    pass aborted there, so the next request does not wait minutes behind it."""
    engine = onnx_process_engine

    async def cancel_then_serve_another() -> tuple[int, int, float]:
        before = engine.segments_synthesised
        long = asyncio.create_task(
            _consume(engine, SynthesisRequest(LONG_SENTENCE, "en", "jf_alpha", speed=0.25))
        )
        await asyncio.sleep(2.0)  # G2P, then the segment is queued or its pass has begun
        long.cancel()
        await asyncio.gather(long, return_exceptions=True)
        started = asyncio.get_running_loop().time()
        short = await _consume(engine, SynthesisRequest("Hi.", "en", "jf_alpha"))
        waited = asyncio.get_running_loop().time() - started
        return short, engine.segments_synthesised - before, waited

    short_segments, synthesised, waited = run(cancel_then_serve_another())

    assert short_segments == 1
    assert synthesised == 1  # the long segment never completed
    assert waited < 30  # the long pass alone takes minutes here
