"""The runtime's wire under test without a fleet: a real `Runtime` on loopback in front of a
scripted container, and a router that counts what the fleet would.

The scripted container speaks the container's `/invocations` contract (JSON lines, chunked) on
real sockets, with timings a real model cannot be asked for: how many lines, how long before
the first and between the others. Its body says so: `{"lines": N, "first_s": S, "every_s": S}`.
Like the container, it runs with handler cancellation, so it sees a closed request at once.
The router stands in for `Fleet.acquire`/`release` and feeds the real `VariantMetrics` as the
fleet does, so a test reads both the in-flight count and the scaling metric.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web

from tts_bench.local_cloud.cloudwatch.metrics import VariantMetrics
from tts_bench.local_cloud.data_plane.runtime import Runtime, Served
from tts_bench.local_cloud.instances.fleet import Instance, InstanceState
from tts_bench.local_cloud.settings import ACCOUNT

ENDPOINT = "scripted"
VARIANT = "AllTraffic"


class ScriptedContainer:
    """An aiohttp server on its own loop and thread; `open_requests` counts handlers running."""

    def __init__(self) -> None:
        self.open_requests = 0
        self.served = 0
        self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/invocations", self._invocations)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.url = ""

    async def _invocations(self, request: web.Request) -> web.StreamResponse:
        try:
            script = json.loads(await request.read() or b"{}")
            lines, first_s, every_s = (
                int(script.get("lines", 1)), float(script.get("first_s", 0.0)),
                float(script.get("every_s", 0.0)),
            )  # fmt: skip
        except (ValueError, TypeError, AttributeError, RecursionError):
            return web.json_response({"error": "not a script"}, status=400)
        if script.get("status", 200) != 200:
            return web.json_response({"error": "scripted"}, status=script["status"])
        self.open_requests += 1
        self.served += 1
        try:
            response = web.StreamResponse(headers={"Content-Type": "application/jsonlines"})
            await response.prepare(request)
            await asyncio.sleep(first_s)
            for index in range(lines):
                if index:
                    await asyncio.sleep(every_s)
                await response.write(json.dumps({"line": index}).encode() + b"\n")
            await response.write_eof()
            return response
        finally:
            self.open_requests -= 1

    def start(self) -> str:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._runner.setup(), self._loop).result(10)
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        asyncio.run_coroutine_threadsafe(site.start(), self._loop).result(10)
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@dataclass
class CountingRouter:
    """One InService instance; acquire/release counted, and the metric fed as the fleet does."""

    instance: Instance
    metrics: VariantMetrics
    acquired: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def acquire(self) -> Instance:
        with self._lock:
            self.acquired += 1
            self.instance.in_flight += 1
            self.metrics.observe_concurrency(self.instance.in_flight, 1)
            return self.instance

    def release(self, instance: Instance) -> None:
        with self._lock:
            instance.in_flight -= 1
            self.metrics.observe_concurrency(instance.in_flight, 1)

    @property
    def in_flight(self) -> int:
        return self.instance.in_flight


class ScriptedBackend:
    """The `RuntimeBackend` of one endpoint served by the scripted container."""

    def __init__(self, router: CountingRouter, ceiling_s: float) -> None:
        self.router = router
        self.ceiling_s = ceiling_s

    def served(self, endpoint_name: str) -> Served | None:
        if endpoint_name != ENDPOINT:
            return None
        return Served(self.router, self.router.metrics, VARIANT)

    def quotas(self) -> dict[str, int]:
        return {"ml.g5.xlarge": 4}

    def invocation_ceiling_s(self) -> float:
        return self.ceiling_s

    def account(self) -> str:
        return ACCOUNT


class Harness:
    """A started runtime in front of a started scripted container."""

    def __init__(self, ceiling_s: float = 5.0) -> None:
        self.container = ScriptedContainer()
        instance = Instance("i-scripted", 0, f"{VARIANT}/i-scripted", InstanceState.IN_SERVICE)
        self.router = CountingRouter(instance, VariantMetrics())
        self.backend = ScriptedBackend(self.router, ceiling_s)
        self.runtime = Runtime(self.backend)
        self.url = ""

    def start(self) -> Harness:
        self.router.instance.url = self.container.start()
        self.url = self.runtime.start()
        return self

    def stop(self) -> None:
        self.runtime.stop()
        self.container.stop()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").split(":")
        return host, int(port)

    def connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=10)
        return sock

    def wait_until(self, condition: object, timeout_s: float = 5.0) -> float:
        """Seconds until `condition()` held; fails the test past `timeout_s`."""
        started = time.monotonic()
        while not condition():  # type: ignore[operator]
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"not within {timeout_s} s")
            time.sleep(0.005)
        return time.monotonic() - started


def request_bytes(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    head = {"Host": "local", "Content-Type": "application/json", "Content-Length": str(len(body))}
    head.update(headers or {})
    lines = [f"POST {path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items()), "", ""]
    return "\r\n".join(lines).encode() + body


def stream_path(endpoint: str = ENDPOINT) -> str:
    return f"/endpoints/{endpoint}/invocations-response-stream"


def invoke_path(endpoint: str = ENDPOINT) -> str:
    return f"/endpoints/{endpoint}/invocations"
