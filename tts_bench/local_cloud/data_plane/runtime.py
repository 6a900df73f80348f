"""The SageMaker runtime's wire layer on loopback (`AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`).

Routes: `POST /endpoints/{name}/invocations` (InvokeEndpoint), `.../invocations-response-stream`
(InvokeEndpointWithResponseStream) and `POST /` with a Service Quotas `X-Amz-Target`. It only
translates: the fleet picks and counts the instance, the metrics backend records the outcome,
`event_stream` and `wire_errors` give the bytes. Each request is forwarded to the chosen
instance's `/invocations`; the stream sends each flushed chunk as PayloadPart frames as it
arrives. The aiohttp server runs on its own event loop in a thread.

A request holds an instance (and counts in flight, so in the scaling metric) only once its
whole body has arrived, and only while its client is there: the server cancels the handler the
moment the client's connection closes, which closes the instance's request with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from tts_bench.local_cloud.cloudwatch.logs import log_stream_arn
from tts_bench.local_cloud.cloudwatch.metrics import VariantMetrics
from tts_bench.local_cloud.control_plane import quotas
from tts_bench.local_cloud.data_plane import event_stream, wire_errors
from tts_bench.local_cloud.errors import NoInstanceError
from tts_bench.local_cloud.instances.fleet import Instance
from tts_bench.telemetry import MalformedHttpIsAWarning

EVENT_STREAM = "application/vnd.amazon.eventstream"
FORWARDED_HEADERS = ("Content-Type", "Accept")
MAX_BODY_BYTES = 6 * 1024 * 1024  # SageMaker's real-time invocation payload limit
# aiohttp's own logger for the server: a malformed request (the client's mistake, answered 400)
# is a warning line here, not an error with a traceback.
SERVER_LOG = logging.getLogger("aiohttp.server.local_cloud")
SERVER_LOG.addFilter(MalformedHttpIsAWarning())


class Router(Protocol):
    """The fleet as the runtime uses it: pick an InService instance and count it busy."""

    def acquire(self) -> Instance: ...

    def release(self, instance: Instance) -> None: ...


@dataclass(frozen=True)
class Served:
    """What the runtime needs of one endpoint."""

    fleet: Router
    metrics: VariantMetrics
    variant_name: str


class RuntimeBackend(Protocol):
    def served(self, endpoint_name: str) -> Served | None: ...

    def quotas(self) -> dict[str, int]: ...

    def invocation_ceiling_s(self) -> float: ...

    def account(self) -> str:
        """The AWS account its endpoints belong to (in ARNs and messages)."""
        ...


SERVED = web.AppKey("served", object)
CLIENT = web.AppKey("client", aiohttp.ClientSession)


def _wire(error: wire_errors.WireError) -> web.Response:
    status, headers, body = error
    return web.Response(status=status, headers=headers, body=body)


def create_app(backend: RuntimeBackend) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[SERVED] = backend

    async def client_session(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        app[CLIENT] = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        yield
        await app[CLIENT].close()

    app.cleanup_ctx.append(client_session)
    app.router.add_post("/endpoints/{name}/invocations", invoke)
    app.router.add_post("/endpoints/{name}/invocations-response-stream", invoke_stream)
    app.router.add_post("/", service_quotas)
    return app


@dataclass
class _Call:
    """One invocation in flight: the instance it holds until `finish`."""

    endpoint: str
    served: Served
    instance: Instance
    arrived: float
    account: str
    status: int = 200

    def finish(self) -> None:
        self.served.fleet.release(self.instance)
        self.served.metrics.record_invocation(time.monotonic() - self.arrived, self.status)

    @property
    def log_stream_arn(self) -> str:
        return log_stream_arn(self.endpoint, self.instance.log_stream, self.account)


async def _read_body(request: web.Request, ceiling_s: float) -> bytes | web.Response:
    """The whole body, before anything is counted: a client that never sends it holds nothing."""
    try:
        async with asyncio.timeout(ceiling_s):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _wire(wire_errors.payload_too_large(MAX_BODY_BYTES))
    except web.RequestPayloadError as exc:  # e.g. a Content-Encoding its bytes do not decode
        # The rest of the body cannot be read either: marked ended, so aiohttp does not try to
        # drain it after the answer (which re-raises the error, logged as unhandled).
        request.content.feed_eof()
        return _wire(wire_errors.unreadable_body(str(exc).replace("\n", " ").strip()))
    except TimeoutError:
        return _wire(wire_errors.body_timeout(ceiling_s))


def _begin(request: web.Request) -> _Call | web.Response:
    endpoint = request.match_info["name"]
    backend = request.app[SERVED]
    served = backend.served(endpoint)  # type: ignore[attr-defined]
    if served is None:
        return _wire(wire_errors.no_endpoint(endpoint, backend.account()))  # type: ignore[attr-defined]
    arrived = time.monotonic()
    try:
        instance = served.fleet.acquire()
    except NoInstanceError as exc:
        return _wire(wire_errors.no_instance(str(exc)))
    served.metrics.record_arrival()
    return _Call(endpoint, served, instance, arrived, backend.account())  # type: ignore[attr-defined]


def _forward_headers(request: web.Request) -> dict[str, str]:
    headers = {h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}
    if "X-Amzn-SageMaker-Custom-Attributes" in request.headers:
        headers["X-Amzn-SageMaker-Custom-Attributes"] = request.headers[
            "X-Amzn-SageMaker-Custom-Attributes"
        ]
    return headers


async def invoke(request: web.Request) -> web.StreamResponse:
    ceiling_s = request.app[SERVED].invocation_ceiling_s()  # type: ignore[attr-defined]
    body = await _read_body(request, ceiling_s)
    if isinstance(body, web.Response):
        return body
    begun = _begin(request)
    if isinstance(begun, web.Response):
        return begun
    call = begun
    try:
        async with asyncio.timeout(ceiling_s):
            async with request.app[CLIENT].post(
                f"{call.instance.url}/invocations", data=body, headers=_forward_headers(request)
            ) as answer:
                payload = await answer.read()
                call.status = answer.status
                if answer.status != 200:
                    return _wire(
                        wire_errors.model_error(
                            call.endpoint, answer.status, payload, call.log_stream_arn, call.account
                        )
                    )
                return web.Response(
                    body=payload,
                    headers={
                        "Content-Type": answer.headers.get("Content-Type", "application/json"),
                        "x-Amzn-Invoked-Production-Variant": call.served.variant_name,
                    },
                )
    except TimeoutError:
        call.status = 424
        return _wire(wire_errors.invocation_timeout(call.endpoint, ceiling_s, streaming=False))
    except aiohttp.ClientError as exc:
        call.status = 424
        return _wire(
            wire_errors.model_error(
                call.endpoint, 502, str(exc).encode(), call.log_stream_arn, call.account
            )
        )
    finally:
        call.finish()


async def invoke_stream(request: web.Request) -> web.StreamResponse:
    ceiling_s = request.app[SERVED].invocation_ceiling_s()  # type: ignore[attr-defined]
    body = await _read_body(request, ceiling_s)
    if isinstance(body, web.Response):
        return body
    deadline = asyncio.get_running_loop().time() + ceiling_s
    begun = _begin(request)
    if isinstance(begun, web.Response):
        return begun
    call = begun
    response: web.StreamResponse | None = None
    try:
        try:
            async with asyncio.timeout_at(deadline):
                answer = await request.app[CLIENT].post(
                    f"{call.instance.url}/invocations", data=body, headers=_forward_headers(request)
                )
        except TimeoutError:
            call.status = 424
            return _wire(wire_errors.invocation_timeout(call.endpoint, ceiling_s, streaming=True))
        except aiohttp.ClientError as exc:
            call.status = 424
            return _wire(
                wire_errors.model_error(
                    call.endpoint, 502, str(exc).encode(), call.log_stream_arn, call.account
                )
            )
        async with answer:
            if answer.status != 200:
                call.status = answer.status
                payload = await answer.read()
                return _wire(
                    wire_errors.model_error(
                        call.endpoint, answer.status, payload, call.log_stream_arn, call.account
                    )
                )
            response = web.StreamResponse(
                headers={
                    "Content-Type": EVENT_STREAM,
                    "X-Amzn-SageMaker-Content-Type": answer.headers.get(
                        "Content-Type", "application/jsonlines"
                    ),
                    "x-Amzn-Invoked-Production-Variant": call.served.variant_name,
                }
            )
            await response.prepare(request)
            await _relay(answer, response, deadline, call, ceiling_s)
            await response.write_eof()
            return response
    except ConnectionResetError:
        # The client left mid-stream and a write found out before the server's cancellation
        # did: leaving the `async with` closed the container's request, so its slot is free;
        # there is no one to answer, and handing aiohttp the response ends it quietly (an
        # exception is a logged "Error handling request" traceback).
        return response if response is not None else web.Response(status=400)
    finally:
        call.finish()


async def _relay(
    answer: aiohttp.ClientResponse,
    response: web.StreamResponse,
    deadline: float,
    call: _Call,
    ceiling_s: float,
) -> None:
    """Each chunk as the container flushes it, as PayloadPart frames; a cut or a late stream
    ends with a ModelStreamError event."""
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in answer.content.iter_any():
                for part in event_stream.split_unaligned(chunk):
                    await response.write(event_stream.payload_part(part).encode())
    except TimeoutError:
        call.status = 424
        await response.write(
            event_stream.model_stream_error(
                "ModelInvocationTimeExceeded",
                f"the model did not finish within {ceiling_s:g} s (endpoint {call.endpoint})",
            )
        )
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
        call.status = 424
        await response.write(
            event_stream.model_stream_error(
                "StreamBroken", wire_errors.stream_broken_message(call.endpoint)
            )
        )


async def service_quotas(request: web.Request) -> web.Response:
    target = request.headers.get("X-Amz-Target", "")
    if not target.startswith(quotas.TARGET_PREFIX):
        return web.json_response(
            {"__type": "UnknownOperationException", "message": f"unknown target {target!r}"},
            status=400,
        )
    raw = await _read_body(request, request.app[SERVED].invocation_ceiling_s())  # type: ignore[attr-defined]
    if isinstance(raw, web.Response):
        return raw
    try:
        body: Any = json.loads(raw or b"{}")
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        body = None
    if not isinstance(body, dict):
        return web.json_response(
            {"__type": "SerializationException", "message": "the body is not a JSON object"},
            status=400,
        )
    backend = request.app[SERVED]
    status, answer = quotas.answer(target, body, backend.quotas(), backend.account())  # type: ignore[attr-defined]
    return web.Response(
        status=status,
        body=json.dumps(answer).encode(),
        content_type="application/x-amz-json-1.1",
    )


class Runtime:
    """The runtime's server on its own loop in a thread; `start` returns its URL."""

    def __init__(self, backend: RuntimeBackend) -> None:
        self._app = create_app(backend)
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(
            self._app,
            access_log=None,
            shutdown_timeout=1.0,
            handler_cancellation=True,  # a client that leaves frees its instance at once
            logger=SERVER_LOG,
        )
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="local-cloud-runtime", daemon=True
        )
        self.url = ""

    def start(self) -> str:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._runner.setup(), self._loop).result(30)
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        asyncio.run_coroutine_threadsafe(site.start(), self._loop).result(30)
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()
