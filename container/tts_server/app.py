"""The aiohttp application: SageMaker's contract (SPEC §3) around one shared engine.

Routes: `GET /ping`, `POST /invocations` (a stream of JSON lines, `http_invocations`) and the
WebSocket `/invocations-bidirectional-stream` (`websocket`). State lives under the typed keys
of `app_state`; the engine comes up in the background from the cleanup context in
`lifecycle`, so the server answers `/ping` 503 before the weights load.

Run it with `web.AppRunner(app, handler_cancellation=True)`, as `python -m tts_server` does,
so a client that goes away cancels its handler and frees its admission slot at once.
"""

from __future__ import annotations

from aiohttp import web

from tts_server.admission import AdmissionGate
from tts_server.app_state import (
    ENGINE_FACTORY,
    GATE,
    LOG,
    SETTINGS,
    STATE,
    EngineFactory,
    Phase,
    ServerState,
)
from tts_server.build_info import MODEL_ID, local_instance_type
from tts_server.http_invocations import invocations
from tts_server.lifecycle import close_sockets, default_engine_factory, drain, engine_lifecycle
from tts_server.logs import ServerLog
from tts_server.settings import ServerSettings
from tts_server.websocket import bidirectional_stream

__all__ = ["GATE", "LOG", "SETTINGS", "STATE", "create_app", "drain", "ping"]


def create_app(
    settings: ServerSettings,
    *,
    log: ServerLog | None = None,
    engine_factory: EngineFactory = default_engine_factory,
) -> web.Application:
    """The application; run it with `web.AppRunner(app, handler_cancellation=True)` so a
    client that goes away cancels its handler (and so frees its slot) at once."""
    if log is None:
        log = ServerLog()
        log.marker("container_started")
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SETTINGS] = settings
    app[STATE] = ServerState(
        instance_type=settings.instance_type or local_instance_type(settings.device),
        image_digest=settings.image_digest,
    )
    app[GATE] = AdmissionGate(settings.max_queue_depth)
    app[LOG] = log
    app[ENGINE_FACTORY] = engine_factory
    app.cleanup_ctx.append(engine_lifecycle)
    app.on_shutdown.append(close_sockets)
    app.router.add_get("/ping", ping)
    app.router.add_post("/invocations", invocations)
    app.router.add_get("/invocations-bidirectional-stream", bidirectional_stream)
    return app


async def ping(request: web.Request) -> web.Response:
    settings, state, gate = request.app[SETTINGS], request.app[STATE], request.app[GATE]
    ready = state.phase is Phase.READY
    body = {
        "status": state.phase.value,
        "ready": ready,
        "queue_max_depth": settings.max_queue_depth,
        "in_flight": gate.in_flight,
        "fingerprint": {
            "model": MODEL_ID,
            "instance_type": state.instance_type,
            "image_digest": state.image_digest,  # null until the engine's weights are known
            "performance_env": state.performance_env,
        },
    }
    return web.json_response(body, status=200 if ready else 503)
