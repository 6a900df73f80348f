"""Curve instances: the container's HTTP contract on the measured curve, many in one process.

Each instance is an aiohttp application on its own loopback port, all of them on one event loop
(`CurveHost`, a thread), so that 50 and more fit on a 2-core machine. It answers what the
container answers (SPEC §3), and the local cloud's runtime reaches it over HTTP as it reaches a
process:
- `GET /ping`: 503 while starting or draining, 200 when ready, with the admission bound, the
  requests in flight and the fingerprint of the ladder it was built from (plus
  `instance_model: curve` and the rate scale, so a measurement can tell);
- `POST /invocations`: the body read with a size bound (413), the gate (503 `queue_saturated`
  past `MAX_QUEUE_DEPTH`, with `retry_after_ms`), the JSON checked for a non-empty
  `context_id` and `transcript` (422 naming the fields; there is no engine to check language
  and voice against), then NDJSON: one chunk event of 20 ms of zero samples at the requested
  rate and encoding when the request's first chunk is due (or when the chain finishes it, if
  sooner), with a model of two chunks a second one when the chain finishes it, and the done
  event when the chain finishes it (`curve_model`);
- `GET /invocations-bidirectional-stream`: refused (501, one line): out of scope.
Start-up follows the ttotal artifact's stages (start-up markers in its log stream, the cloud's
clock); `stop` drains as SIGTERM does (ping 503, nothing new admitted, in-flight finishes; what
still runs after 25 s is cut, where the container would end it with an error event); `kill`
cuts every connection at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from aiohttp import web

from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.instances.curve_model import (
    IN_SERVICE,
    CurveModel,
    StartupTimeline,
    unit_exponentials,
)
from tts_bench.local_cloud.instances.fleet import InstanceServer, InstanceStartError, Launch
from tts_bench.serving.server_ping import CURVE_MODEL
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH, QUEUE_SATURATED_ERROR

INSTANCE_MODEL: Final = CURVE_MODEL  # what its /ping says it is
MAX_BODY_BYTES: Final = 64 * 1024  # the container's default bound
DRAIN_DEADLINE_S: Final = 25.0  # the container ends streams still running after 25 s of SIGTERM
CHUNK_S: Final = 0.020
BYTES_PER_SAMPLE: Final = {"pcm_s16le": 2, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}
DEFAULT_RATE: Final = 24000


@dataclass(frozen=True)
class CurveIdentity:
    """The build a curve instance stands for: the ladder's fingerprint, as `/ping` reports it."""

    model: str
    instance_type: str
    image_digest: str
    performance_env: Mapping[str, str]
    rate_scale: float

    def ping_fields(self) -> dict[str, Any]:
        return {
            "fingerprint": {
                "model": self.model,
                "instance_type": self.instance_type,
                "image_digest": self.image_digest,
                "performance_env": dict(self.performance_env),
            },
            "instance_model": INSTANCE_MODEL,
            "rate_scale": self.rate_scale,
        }


# --------------------------------------------------------------------------- the chain


@dataclass(eq=False)
class Job:
    """One admitted request in the instance's queue."""

    started: asyncio.Future[float]  # the loop time it reached the head
    finished: asyncio.Future[None]


class CurveQueue:
    """In-order service on the event loop: the head finishes after `model.service_s(n, draw)`,
    redrawn whenever the occupancy n changes (exponential: exact, it has no memory;
    deterministic: drawn once, when a request reaches the head)."""

    def __init__(self, model: CurveModel, rng: np.random.Generator) -> None:
        self._model = model
        self._rng = rng
        self._draws: list[float] = []
        self._jobs: deque[Job] = deque()
        self._handle: asyncio.TimerHandle | None = None

    @property
    def occupancy(self) -> int:
        return len(self._jobs)

    def join(self) -> Job:
        loop = asyncio.get_running_loop()
        job = Job(loop.create_future(), loop.create_future())
        self._jobs.append(job)
        if len(self._jobs) == 1:
            job.started.set_result(loop.time())
            self._schedule()
        elif self._model.service == "exponential":
            self._schedule()
        return job

    def leave(self, job: Job) -> None:
        """A request whose client went away: out of the queue, its slot free. (Its handler's
        cancellation may already have cancelled the futures it was awaiting.)"""
        if job not in self._jobs:
            return
        head = self._jobs[0] is job
        self._jobs.remove(job)
        if not job.finished.done():
            job.finished.cancel()
        if head:
            self._start_head()
        elif self._model.service == "exponential":
            self._schedule()

    def _draw(self) -> float:
        if not self._draws:
            self._draws = unit_exponentials(self._rng)
        return self._draws.pop()

    def _schedule(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._jobs:
            delay = self._model.service_s(len(self._jobs), self._draw())
            self._handle = asyncio.get_running_loop().call_later(delay, self._finish_head)

    def _finish_head(self) -> None:
        self._handle = None
        job = self._jobs.popleft()
        if not job.finished.done():
            job.finished.set_result(None)
        self._start_head()

    def _start_head(self) -> None:
        if self._jobs and not self._jobs[0].started.done():
            self._jobs[0].started.set_result(asyncio.get_running_loop().time())
        self._schedule()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        for job in self._jobs:
            for future in (job.finished, job.started):
                if not future.done():
                    future.cancel()
        self._jobs.clear()


# --------------------------------------------------------------------------- the application


@dataclass
class CurveState:
    """One instance's mutable state, on its event loop."""

    model: CurveModel
    identity: CurveIdentity
    queue: CurveQueue
    bound: int | None
    status: str = "loading"  # loading → ready → draining
    in_flight: int = 0
    transports: set[asyncio.BaseTransport] = field(default_factory=set)
    idle: asyncio.Event = field(default_factory=asyncio.Event)


CURVE_STATE = web.AppKey("curve_state", CurveState)


def _refusal(state: CurveState, error: str, message: str) -> web.Response:
    rate = state.model.rate_rps(max(1, state.in_flight))
    hint = 1000 if error != QUEUE_SATURATED_ERROR or rate <= 0 else int(1000 / rate)
    body = {
        "error": error,
        "message": message,
        "retry_after_ms": min(10_000, max(50, hint)),
        "queue_max_depth": state.bound,
        "in_flight": state.in_flight,
    }
    return web.json_response(body, status=503)


def _invalid(problems: list[tuple[str, str]]) -> web.Response:
    return web.json_response(
        {
            "error": "invalid_request",
            "message": "; ".join(f"{f}: {m}" for f, m in problems),
            "errors": [{"field": f, "message": m} for f, m in problems],
        },
        status=422,
    )


def _parse(request: web.Request, raw: bytes) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    if request.content_type != "application/json":
        problems.append(("content-type", f"is {request.content_type!r}; send application/json"))
    try:
        data = json.loads(raw)
    except ValueError:
        return {}, [*problems, ("body", "is not JSON")]
    if not isinstance(data, dict):
        return {}, [*problems, ("body", "is not a JSON object")]
    for name in ("context_id", "transcript"):
        value = data.get(name)
        if not isinstance(value, str) or not value.strip():
            problems.append((name, "is required: a non-empty string"))
    return data, problems


def _silence(data: dict[str, Any]) -> tuple[str, int]:
    """20 ms of zero samples at the requested rate and encoding (the audio is not the point)."""
    fmt = data.get("output_format") if isinstance(data.get("output_format"), dict) else {}
    rate = fmt.get("sample_rate") if isinstance(fmt.get("sample_rate"), int) else DEFAULT_RATE
    width = BYTES_PER_SAMPLE.get(str(fmt.get("encoding")), 2)
    return base64.b64encode(bytes(int(rate * CHUNK_S) * width)).decode(), rate


def _line(event: dict[str, Any]) -> bytes:
    return (json.dumps(event, separators=(",", ":")) + "\n").encode()


async def ping(request: web.Request) -> web.Response:
    state = request.app[CURVE_STATE]
    ready = state.status == "ready"
    body = {
        "status": state.status,
        "ready": ready,
        "queue_max_depth": state.bound,
        "in_flight": state.in_flight,
        **state.identity.ping_fields(),
    }
    return web.json_response(body, status=200 if ready else 503)


async def invocations(request: web.Request) -> web.StreamResponse:
    state = request.app[CURVE_STATE]
    if state.status != "ready":
        error = "not_ready" if state.status == "loading" else "draining"
        return _refusal(state, error, f"the server is {state.status}; retry later")
    raw = await request.read()  # past MAX_BODY_BYTES aiohttp answers 413
    if state.bound is not None and state.in_flight >= state.bound:
        message = f"{state.in_flight} requests in flight, the bound is {state.bound}"
        return _refusal(state, QUEUE_SATURATED_ERROR, message)
    data, problems = _parse(request, raw)
    if problems:
        return _invalid(problems)
    state.in_flight += 1
    state.idle.clear()
    if request.transport is not None:
        state.transports.add(request.transport)
    try:
        return await _serve(request, state, data)
    finally:
        state.in_flight -= 1
        if request.transport is not None:
            state.transports.discard(request.transport)
        if state.in_flight == 0:
            state.idle.set()


async def _serve(
    request: web.Request, state: CurveState, data: dict[str, Any]
) -> web.StreamResponse:
    context_id = str(data["context_id"])
    job = state.queue.join()
    response: web.StreamResponse | None = None
    try:
        started = await job.started
        loop = asyncio.get_running_loop()
        # The first chunk is part of the request's service: it leaves at the first-chunk time,
        # or when the chain finishes the request sooner, so the request is never in flight (nor
        # holds an admission slot) longer than the chain holds it, as in the simulator.
        due_s = max(0.0, started + state.model.first_chunk_after_s - loop.time())
        await asyncio.wait({job.finished}, timeout=due_s)
        audio, rate = _silence(data)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/jsonlines"})
        await response.prepare(request)
        chunk = {
            "type": "chunk",
            "context_id": context_id,
            "status_code": 206,
            "done": False,
            "data": audio,
            "sampling_rate": rate,
            "step_time": round(state.model.first_chunk_after_s, 6),
        }
        await response.write(_line(chunk))
        await job.finished
        if state.model.chunks == 2:  # the second sentence, as the chain finishes the request
            await response.write(_line(chunk))
        done = {
            "type": "done",
            "context_id": context_id,
            "done": True,
            "status_code": 200,
            "first_chunk_latency_ms": round(state.model.first_chunk_after_s * 1000, 3),
        }
        await response.write(_line(done))
        await response.write_eof()
        return response
    except ConnectionResetError:  # its client left: as the container, nothing more to send
        return response or web.Response(status=499)
    finally:
        state.queue.leave(job)


async def bidirectional_refused(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "error": "not_supported",
            "message": "curve instances serve /invocations only; the bidirectional stream is "
            "out of scope for them: run the local cloud with real instances for it",
        },
        status=501,
    )


def create_curve_app(state: CurveState) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[CURVE_STATE] = state
    app.router.add_get("/ping", ping)
    app.router.add_post("/invocations", invocations)
    app.router.add_get("/invocations-bidirectional-stream", bidirectional_refused)
    return app


# --------------------------------------------------------------------------- hosting


class CurveHost:
    """One event loop in a thread that runs every curve instance of a local cloud."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="local-cloud-curve-instances", daemon=True
        )
        self._thread.start()

    def run(self, make: Callable[[], Awaitable[Any]], timeout_s: float = 30.0) -> Any:
        async def call() -> Any:
            return await make()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout_s)

    def submit(self, make: Callable[[], Awaitable[Any]]) -> None:
        async def call() -> Any:
            return await make()

        asyncio.run_coroutine_threadsafe(call(), self._loop)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()


class CurveServer:
    """One curve instance as the fleet's `InstanceServer`."""

    def __init__(
        self,
        host: CurveHost,
        model: CurveModel,
        identity: CurveIdentity,
        timeline: StartupTimeline,
        clock: ServiceClock,
        bound: int | None,
        rng: np.random.Generator,
        on_line: Callable[[str], None],
    ) -> None:
        self._host = host
        self._model, self._identity, self._timeline = model, identity, timeline
        self._clock, self._bound, self._rng = clock, bound, rng
        self._on_line = on_line
        self._state: CurveState | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._in_service = threading.Event()
        self._exited = threading.Event()
        self._exit_code: int | None = None
        self._launched_at = clock.now()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def _log(self, msg: str, **fields: Any) -> None:
        self._on_line(json.dumps({"level": "info", "msg": msg, "ts": self._clock.now(), **fields}))

    def start(self, at_s: float | None = None) -> None:
        # The timeline runs from the launch as modelled (`at_s`: the instant the fleet's
        # provisioning ended), not from when this thread got here or opened the port: tenths
        # of a second on a loaded machine, K times that on the cloud's clock.
        self._launched_at = self._clock.now() if at_s is None else at_s
        self._host.run(self._open)
        self._log("listening", host="127.0.0.1", port=self._port, instance_model=INSTANCE_MODEL)
        self._host.submit(self._start_up)

    async def _open(self) -> None:
        self._state = CurveState(
            self._model, self._identity, CurveQueue(self._model, self._rng), self._bound
        )
        self._state.idle.set()
        self._runner = web.AppRunner(
            create_curve_app(self._state), access_log=None, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def _start_up(self) -> None:
        """Each marker at its measured offset from the launch, on the cloud's clock, and stamped
        with that instant: the modelled container logs it then, while this loop may get to it
        late by the machine's scheduling delay (K times that on the cloud's clock), which is no
        part of the model. InService after the last."""
        for step in self._timeline.steps:
            at_s = self._launched_at + step.at_s
            wait = self._clock.to_wall(at_s) - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if self._exited.is_set():
                return
            if step.event == IN_SERVICE:
                self._in_service.set()
                continue
            if step.event == "ready" and self._state is not None:
                self._state.status = "ready"
            self._on_line(
                json.dumps(
                    {
                        "level": "info",
                        "msg": "startup_marker",
                        "marker": step.event,
                        "ts": at_s,
                    }
                )
            )

    def wait_ready(self, timeout_s: float) -> None:
        if not self._in_service.wait(timeout_s):
            raise InstanceStartError(f"not in service within {timeout_s:.0f} s")
        if self._exited.is_set():
            raise InstanceStartError("stopped before it was in service")

    def wait_exit(self) -> int | None:
        self._exited.wait()
        return self._exit_code

    def stop(self) -> int | None:
        self._log("draining", in_flight=self._state.in_flight if self._state else 0)
        self._host.run(self._drain, timeout_s=DRAIN_DEADLINE_S + 10)
        self._finish(0)
        self._log("drained")
        return self._exit_code

    async def _drain(self) -> None:
        state = self._state
        if state is None:
            return
        state.status = "draining"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.idle.wait(), DRAIN_DEADLINE_S)
        await self._close(abort=True)

    def kill(self) -> None:
        self._host.run(lambda: self._close(abort=True))
        self._finish(-9)

    async def _close(self, abort: bool) -> None:
        state = self._state
        if state is not None:
            state.status = "draining"
            state.queue.close()
            if abort:
                for transport in list(state.transports):
                    transport.abort()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _finish(self, code: int) -> None:
        if not self._exited.is_set():
            self._exit_code = code
            self._exited.set()
            self._in_service.set()  # a start-up still waiting ends now


def curve_launcher(
    host: CurveHost,
    model: CurveModel,
    identity: CurveIdentity,
    timeline: StartupTimeline,
    clock: ServiceClock,
    seeds: np.random.SeedSequence,
) -> Launch:
    """The fleet's `launch` for curve instances: each gets its own random stream."""

    def launch(
        env: dict[str, str], _log_path: Path | None, on_line: Callable[[str], None]
    ) -> InstanceServer:
        raw = env.get(ENV_MAX_QUEUE_DEPTH)
        bound = int(raw) if raw else None
        rng = np.random.default_rng(seeds.spawn(1)[0])
        return CurveServer(host, model, identity, timeline, clock, bound, rng, on_line)

    return launch
