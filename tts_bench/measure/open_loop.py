"""The open loop: requests sent at their intended times whatever is still outstanding.

One sender (`OpenLoopSender`) over one clock (`EpochClock`), shared by the surge (Poisson
arrivals at one instance), organic T_total (the probe's own load on a scaling endpoint) and the
rehearsal. Each request is its own task, the sender's own lag is recorded (`Sample.start −
Sample.intended_start`) and latency counts from the intended time, so coordinated omission
cannot hide; over response-stream each invocation runs on a worker thread (boto3 blocks).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import aiohttp

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.errors import RefusalError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.playback import PlaybackTracker
from tts_bench.measure.samples import Sample
from tts_bench.measure.transport.contract import KOKORO, EndpointContract
from tts_bench.measure.transport.response_stream import (
    failure_of,
    invoke,
    payload_lines,
)
from tts_bench.measure.transport.stream_events import StreamReading

REQUEST_TIMEOUT_S = 70.0  # the server ends every invocation within SageMaker's 60 s ceiling
# response-stream: invocations in flight at once (threads and pooled connections). Past it a
# send waits for a thread; the lag is recorded and latency still counts from the intended time.
STREAM_THREADS = 256
STOP_CHECK_S = 0.5  # a stopped sender notices within this while it waits for the next send


class EpochClock:
    """Epoch seconds read from the monotonic clock: never steps back, one anchor for all."""

    def __init__(self) -> None:
        self._offset = time.time() - time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() + self._offset

    def perf_of(self, epoch: float) -> float:
        return epoch - self._offset


@dataclass(frozen=True, slots=True)
class StreamEndpoint:
    """Where response-stream invocations go: a runtime client and the endpoint's variant."""

    client: Any
    endpoint: str
    variant: str


class OpenLoopSender:
    """Sends one request per intended time and records its sample: over a local transport
    (`host`), or over response-stream to an endpoint (`stream`); each built and read under
    `contract`."""

    def __init__(
        self,
        host: str,
        transport: Transport,
        utterances: Sequence[Utterance],
        clock: EpochClock,
        stream: StreamEndpoint | None = None,
        threads: int = STREAM_THREADS,
        contract: EndpointContract = KOKORO,
    ) -> None:
        if transport is Transport.RESPONSE_STREAM and stream is None:
            raise RefusalError("a response-stream surge needs an endpoint")
        self.host = host.rstrip("/")
        self.transport = transport
        self.utterances = utterances
        self.clock = clock
        self.stream = stream
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.threads = threads
        self.contract = contract
        self.finished: list[Sample] = []  # every sample as its stream ends (read while running)
        self._stop = threading.Event()
        self._threads: ThreadPoolExecutor | None = None

    def stop(self) -> None:
        """Send nothing more; `run` returns once the streams already sent have ended."""
        self._stop.set()

    async def run(self, intended: Sequence[float]) -> list[Sample]:
        """Send at each intended epoch time (until `stop`); wait for every stream to end."""
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        if self.stream is not None and self._threads is None:
            self._threads = ThreadPoolExecutor(self.threads, thread_name_prefix="surge")
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            tasks = []
            for i, at in enumerate(intended):
                while (delay := self.clock.perf_of(at) - time.perf_counter()) > 0:
                    if self._stop.is_set():
                        break
                    await asyncio.sleep(min(delay, STOP_CHECK_S))
                if self._stop.is_set():
                    break
                while self.clock.now() < at:  # asyncio may wake a hair early
                    await asyncio.sleep(0)
                utterance = self.utterances[i % len(self.utterances)]
                tasks.append(asyncio.create_task(self.one(session, utterance, at)))
            return list(await asyncio.gather(*tasks))

    async def one(self, session: aiohttp.ClientSession, utterance: Utterance, at: float) -> Sample:
        context_id = uuid.uuid4().hex[:12]
        body = self.contract.body(utterance, context_id)
        reading = StreamReading(
            context_id, self.clock.now, heard=PlaybackTracker(), rules=self.contract.events
        )
        start = reading.started
        try:
            if self.transport is Transport.LOCAL_WS:
                await self._ws(session, body, reading)
            elif self.stream is not None:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self._threads, self._response_stream, body, reading)
            else:
                await self._http(session, body, reading)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            reading.fail(f"{type(exc).__name__}: {exc}")
        outcome = reading.end()
        end = self.clock.now()
        heard = reading.heard.result()  # type: ignore[union-attr]
        sample = Sample(
            rung=None,
            worker=self.worker,
            start=start,
            end=end,
            ttfab_ms=reading.ttfab_ms,
            latency_ms=(end - start) * 1000,
            outcome=outcome,
            detail=reading.detail,
            server_first_chunk_ms=reading.server_first_chunk_ms,
            audio_ms=heard.audio_s * 1000 if heard.audio_s else None,
            stall_ms=heard.stall_s * 1000 if heard.audio_s else None,
            intended_start=at,
        )
        self.finished.append(sample)
        return sample

    async def _http(
        self, session: aiohttp.ClientSession, body: dict, reading: StreamReading
    ) -> None:
        headers = {"Accept": "application/jsonlines"}
        async with session.post(f"{self.host}/invocations", json=body, headers=headers) as resp:
            if resp.status != 200:
                reading.refused(resp.status, (await resp.text())[:200])
                return
            while line := await resp.content.readline():
                if line.strip() and reading.feed(line):
                    return

    async def _ws(self, session: aiohttp.ClientSession, body: dict, reading: StreamReading) -> None:
        url = "ws" + self.host.removeprefix("http") + "/invocations-bidirectional-stream"
        async with session.ws_connect(url) as ws:
            await ws.send_str(json.dumps(body))
            async for message in ws:
                if message.type is not aiohttp.WSMsgType.TEXT:
                    break
                if reading.feed(message.data):
                    return

    def _response_stream(self, body: dict, reading: StreamReading) -> None:
        """One invocation, read to its end (so the connection stays pooled); on a worker thread."""
        assert self.stream is not None
        events = None
        try:
            events = invoke(self.stream.client, self.stream.endpoint, body, self.stream.variant)
            for line in payload_lines(events):
                reading.feed(line)  # after the end it only drains
        except Exception as exc:
            failure = failure_of(exc, self.contract.events)
            if failure is None:
                raise
            reading.fail(*failure)
        finally:
            if events is not None:
                events.close()

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
