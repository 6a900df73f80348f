"""What the handlers share: typed app keys, the server's phase and live generations.

Every piece of state lives under a typed `web.AppKey`; a `Generation` is one utterance being
served (an HTTP request or one WebSocket context) with the deadline scope that can end it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from aiohttp import web

from tts_server.admission import AdmissionGate, RecentServiceTime
from tts_server.engine.base import Engine
from tts_server.logs import ServerLog
from tts_server.protocol import TtsRequest
from tts_server.settings import ServerSettings

EngineFactory = Callable[[ServerSettings], Engine]


class Phase(StrEnum):
    LOADING = "loading"
    READY = "ready"
    DRAINING = "draining"


@dataclass(eq=False, slots=True)
class Generation:
    """One utterance being served; `stop_for_drain` ends it at once with an error event."""

    request: TtsRequest
    request_id: str
    arrival: float  # loop time
    scope: asyncio.Timeout | None = None
    drained: bool = False

    def stop_for_drain(self) -> None:
        self.drained = True
        if self.scope is not None and not self.scope.expired():
            self.scope.reschedule(asyncio.get_running_loop().time())


@dataclass(slots=True)
class ServerState:
    """What the handlers share: the phase, the engine once loaded, and live generations."""

    phase: Phase = Phase.LOADING
    engine: Engine | None = None
    instance_type: str = ""
    image_digest: str | None = None
    performance_env: dict[str, str] = field(default_factory=dict)
    generations: set[Generation] = field(default_factory=set)
    sockets: set[web.WebSocketResponse] = field(default_factory=set)
    recent: RecentServiceTime = field(default_factory=RecentServiceTime)
    failed: asyncio.Future[str] | None = None  # set to a reason when the engine cannot come up


SETTINGS = web.AppKey("settings", ServerSettings)
STATE = web.AppKey("state", ServerState)
GATE = web.AppKey("gate", AdmissionGate)
LOG = web.AppKey("log", ServerLog)
ENGINE_FACTORY = web.AppKey("engine_factory", EngineFactory)
