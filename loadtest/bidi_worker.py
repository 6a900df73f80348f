"""The AWS SDK's HTTP/2 bidirectional stream, driven over pipes (runs under Python ≥ 3.12).

`aws-sdk-sagemaker-runtime-http2` needs Python ≥ 3.12 and asyncio; the project runs on 3.11
and Locust on gevent. So a Locust process (or a test) starts this script with the `.venv-http2`
interpreter that `scripts/bootstrap` makes, and talks to it in JSON lines:

    stdin  {"op": "open",   "session": S, "endpoint": NAME, "events": false}
           {"op": "send",   "session": S, "body": {...request with context_id...}}
           {"op": "cancel", "session": S, "context_id": C}
           {"op": "close",  "session": S}
    stdout {"kind": "ready"}  once, then per session:
           {"kind": "opened", "session": S}  or  {"kind": "failed", "session": S, "error": ..., "message": ...}
           {"kind": "event", "session": S, "event": {...}, "at": WALL}          (only with "events": true)
           {"kind": "turn", "session": S, "context_id": C, "ttfab_ms": ..., "latency_ms": ...,
            "outcome": "ok"|"error"|"cancelled"|"rejected", "detail": ..., "server_first_chunk_ms": ...,
            "audio_bytes": N}
           {"kind": "closed", "session": S, "error": null|..., "message": ...}

One asyncio loop carries every session of the process over one SDK client (the CRT transport
multiplexes them as HTTP/2 streams). Turns are timed here, where the bytes arrive: TTFAB from
just before the request event is sent to the first `chunk` event that carries audio, on this
process's clocks, so the pipe to the Locust process adds nothing to the figures. Events are read
by the project's one reader (`tts_bench.measure.transport.stream_events`, standard library only; the
parent puts this checkout on PYTHONPATH). The endpoint, region and credentials come from the
environment (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, …). Besides that module, only the
standard library and the SDK are imported: this file runs outside the project's venv.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventPayloadPart,
)
from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

from tts_bench.measure.transport.stream_events import StreamReading, event_of


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def error_name(exc: BaseException) -> tuple[str, str]:
    """The SDK error's name (ErrorCode where it has one) and its message."""
    code = getattr(exc, "error_code", None)
    name = type(exc).__name__ + (f":{code}" if code else "")
    return name, str(getattr(exc, "message", None) or exc)


def report(session: str, turn: StreamReading) -> None:
    """One turn as it ended, timed on this process's clocks."""
    outcome = turn.end()
    emit(
        {
            "kind": "turn",
            "session": session,
            "context_id": turn.context_id,
            "ttfab_ms": turn.ttfab_ms,
            "latency_ms": (turn.clock() - turn.started) * 1000,
            "outcome": outcome.value,
            "detail": turn.detail,
            "audio_bytes": turn.audio_bytes,
            "server_first_chunk_ms": turn.server_first_chunk_ms,
        }
    )


class Session:
    """One bidirectional stream: sends what the parent asks, reports every turn as it ends."""

    def __init__(self, worker: Worker, name: str, endpoint: str, echo_events: bool) -> None:
        self.worker, self.name, self.endpoint, self.echo = worker, name, endpoint, echo_events
        self.turns: dict[str, StreamReading] = {}
        self.stream: Any = None
        self.reader: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def open(self) -> None:
        try:
            self.stream = await self.worker.client.invoke_endpoint_with_bidirectional_stream(
                InvokeEndpointWithBidirectionalStreamInput(endpoint_name=self.endpoint)
            )
            await self.stream.await_output()
        except Exception as exc:
            name, message = error_name(exc)
            emit({"kind": "failed", "session": self.name, "error": name, "message": message})
            self.worker.sessions.pop(self.name, None)
            return
        finally:
            self.ready.set()
        emit({"kind": "opened", "session": self.name})
        self.reader = asyncio.create_task(self.read())

    async def send_json(self, body: dict[str, Any]) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        event = RequestStreamEventPayloadPart(
            value=RequestPayloadPart(bytes_=data, data_type="UTF8")
        )
        await self.stream.input_stream.send(event)

    async def send(self, body: dict[str, Any]) -> None:
        await self.ready.wait()
        if self.stream is None:
            return
        context_id = str(body.get("context_id"))
        turn = StreamReading(context_id)
        self.turns[context_id] = turn
        try:
            await self.send_json(body)
        except Exception as exc:
            self.turns.pop(context_id, None)
            turn.fail("{}: {}".format(*error_name(exc)))
            report(self.name, turn)

    async def cancel(self, context_id: str) -> None:
        await self.ready.wait()
        if self.stream is not None:
            await self.send_json({"type": "cancel", "context_id": context_id})

    async def read(self) -> None:
        error: tuple[str, str] | None = None
        _, output = await self.stream.await_output()
        try:
            while (event := await output.receive()) is not None:
                if isinstance(event, ResponseStreamEventPayloadPart) and event.value.bytes_:
                    self.on_event(event.value.bytes_)
        except Exception as exc:  # ModelStreamError and friends: the SDK raises them here
            error = error_name(exc)
        for turn in self.turns.values():
            if error:
                turn.fail("{}: {}".format(*error))
            report(self.name, turn)
        self.turns.clear()
        self.worker.sessions.pop(self.name, None)
        emit(
            {
                "kind": "closed",
                "session": self.name,
                "error": error[0] if error else None,
                "message": error[1] if error else "",
            }
        )

    def on_event(self, raw: bytes) -> None:
        """One container event: to the turn it answers (read by the project's one reader)."""
        event = json.loads(raw)
        if self.echo:
            emit({"kind": "event", "session": self.name, "event": event, "at": time.time()})
        context_id = str(event.get("context_id"))
        turn = self.turns.get(context_id)
        if turn is not None and (read := event_of(event)) is not None and turn.apply(read):
            self.turns.pop(context_id)
            report(self.name, turn)

    async def close(self) -> None:
        await self.ready.wait()
        if self.stream is None:
            return
        await self.stream.input_stream.close()
        if self.reader is not None:
            await self.reader


class Worker:
    """Reads commands from stdin; one SDK client for every session of this process."""

    def __init__(self) -> None:
        self.client: AsyncSageMakerRuntimeHTTP2Client
        self.sessions: dict[str, Session] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def handle(self, command: dict[str, Any]) -> None:
        op, name = command.get("op"), str(command.get("session"))
        if op == "open":
            session = Session(self, name, str(command["endpoint"]), bool(command.get("events")))
            self.sessions[name] = session
            self.spawn(session.open())
            return
        session = self.sessions.get(name)
        if session is None:
            emit({"kind": "closed", "session": name, "error": "NoSuchSession", "message": op})
        elif op == "send":
            self.spawn(session.send(command["body"]))
        elif op == "cancel":
            self.spawn(session.cancel(str(command["context_id"])))
        elif op == "close":
            self.spawn(session.close())

    async def run(self) -> None:
        # Endpoint, region and credentials resolve from the environment, as for any AWS client.
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
            transport=AWSCRTHTTPClient(client_config=AWSCRTHTTPClientConfig(force_http_2=True)),
            max_attempts=1,  # retries off while measuring: a retried request hides a failure
        )
        self.client = AsyncSageMakerRuntimeHTTP2Client(config=config)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        emit({"kind": "ready", "python": sys.version.split()[0]})
        while line := await reader.readline():
            if line.strip():
                self.handle(json.loads(line))
        for session in list(self.sessions.values()):
            self.spawn(session.close())
        await asyncio.gather(*self.tasks, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(Worker().run())
