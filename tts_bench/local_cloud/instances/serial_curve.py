"""A serial curve instance on a loopback port: the known truth a ladder is checked against.

One curve instance (the local cloud's, `curve_instance`) with a constant throughput μ and a
set first-chunk time, ready at once, in a thread of this process; its true Q_max is
`curve_truth.true_q_max` (exponential service). The ladder measures it only with
`--curve-check`. A test may bound its admission (`bound`, as MAX_QUEUE_DEPTH), make its
service deterministic, or have its streams carry a second chunk (`CurveModel`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import numpy as np
from aiohttp import web

from tts_bench.local_cloud.instances.curve_instance import (
    CurveHost,
    CurveIdentity,
    CurveQueue,
    CurveState,
    create_curve_app,
)
from tts_bench.local_cloud.instances.curve_model import CurveModel, ServiceLaw
from tts_bench.planning.curve import Curve

IDENTITY = CurveIdentity("kokoro-82m", "ml.g5.xlarge", "sha256:" + "5e" * 32, {}, 1.0)


@contextmanager
def serial_curve(
    rate_rps: float,
    first_chunk_ms: float,
    seed: int,
    *,
    bound: int | None = None,
    service: ServiceLaw = "exponential",
    chunks: Literal[1, 2] = 1,
) -> Iterator[str]:
    """Serve until the block ends; yields the instance's base URL."""
    model = CurveModel(
        Curve((1.0,), (rate_rps,)), first_chunk_ms / 1000.0, service=service, chunks=chunks
    )
    host = CurveHost()
    runner: web.AppRunner | None = None

    async def start() -> int:
        nonlocal runner
        state = CurveState(model, IDENTITY, CurveQueue(model, np.random.default_rng(seed)), bound)
        state.status = "ready"
        state.idle.set()
        runner = web.AppRunner(create_curve_app(state), access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return int(runner.addresses[0][1])

    async def stop() -> None:
        if runner is not None:
            await runner.cleanup()

    try:
        port = host.run(start)
        yield f"http://127.0.0.1:{port}"
    finally:
        host.run(stop)
        host.stop()
