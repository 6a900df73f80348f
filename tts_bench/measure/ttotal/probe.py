"""The T_total probe: closed-loop threads holding load while a new server or instance comes up.

One probe for both measurements: beside a local server (`speak`, plain HTTP on loopback) and
on a SageMaker endpoint (`StreamSpeaker`, InvokeEndpointWithResponseStream). The transport is
a parameter, a function from an utterance to one `ProbeSample`; the threads, their stop and the
summary are the same. Each stream is read by `stream_events.StreamReading`.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from tts_bench.errors import TtsBenchError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.transport.contract import KOKORO, EndpointContract
from tts_bench.measure.transport.response_stream import failure_of, invoke, payload_lines
from tts_bench.measure.transport.stream_events import StreamReading

REQUEST_TIMEOUT_S = 70.0  # past SageMaker's 60 s invocation ceiling
JOIN_TIMEOUT_S = 75.0  # a thread still reading gets this long to notice the stop


class TtotalError(TtsBenchError):
    """The new server or instance did not come up, did not serve, or its stages cannot be read."""


@dataclass(frozen=True, slots=True)
class ProbeSample:
    """One probe request as the client saw it (epoch seconds)."""

    end: float
    ttfab_ms: float | None  # None: failed, or no audio (counts as over any recovery bound)
    latency_ms: float | None = None  # to the stream's end; None when it failed
    start: float | None = None
    detail: str = ""  # why it failed

    @property
    def ok(self) -> bool:
        return self.ttfab_ms is not None

    @property
    def ttfab_s(self) -> float | None:
        return None if self.ttfab_ms is None else self.ttfab_ms / 1000


def sample_of(reading: StreamReading, start: float) -> ProbeSample:
    """The finished reading as a sample: a request that did not end `done` has no TTFAB."""
    end = time.time()
    reading.end()
    if not reading.ok or reading.ttfab_ms is None:
        return ProbeSample(end, None, None, start, reading.detail or "no audio")
    return ProbeSample(end, reading.ttfab_ms, (end - start) * 1000, start)


def speak(
    base_url: str,
    utterance: Utterance,
    timeout_s: float = REQUEST_TIMEOUT_S,
    contract: EndpointContract = KOKORO,
) -> ProbeSample:
    """One streamed `/invocations` request to a local server, read event by event (threads)."""
    parts = urlsplit(base_url)
    start = time.time()
    reading = StreamReading(uuid.uuid4().hex[:12], time.time, start, rules=contract.events)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        body = json.dumps(contract.body(utterance, reading.context_id or ""))
        connection.request("POST", "/invocations", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            reading.refused(response.status, response.read(200).decode("utf-8", "replace"))
            return sample_of(reading, start)
        while line := response.readline():
            if line.strip() and reading.feed(line):
                break
    except (OSError, http.client.HTTPException, ValueError) as exc:
        reading.fail(f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()
    return sample_of(reading, start)


@dataclass(frozen=True)
class StreamSpeaker:
    """One response-stream invocation per call, read to its end (the connection stays pooled),
    built and read under `contract`."""

    client: Any
    endpoint: str
    variant: str | None
    contract: EndpointContract = KOKORO

    def __call__(self, utterance: Utterance) -> ProbeSample:
        start = time.time()
        reading = StreamReading(uuid.uuid4().hex[:12], rules=self.contract.events)
        stream = None
        try:
            body = self.contract.body(utterance, reading.context_id or "")
            stream = invoke(self.client, self.endpoint, body, self.variant)
            for line in payload_lines(stream):
                reading.feed(line)  # after the end it only drains
        except Exception as exc:
            failure = failure_of(exc, self.contract.events)
            if failure is None:
                raise
            reading.fail(*failure)
        finally:
            if stream is not None:
                stream.close()
        return sample_of(reading, start)


@dataclass
class Probe:
    """`concurrency` closed-loop threads, each speaking one utterance after another until stopped."""

    speak: Callable[[Utterance], ProbeSample]
    utterances: Sequence[Utterance]
    concurrency: int
    samples: list[ProbeSample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _loop(self, offset: int) -> None:
        for i in itertools.count(offset):
            if self._stop.is_set():
                return
            self.samples.append(self.speak(self.utterances[i % len(self.utterances)]))

    def start(self) -> Probe:
        for k in range(self.concurrency):
            thread = threading.Thread(target=self._loop, args=(k,), name=f"probe-{k}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def wait_warm(self, timeout_s: float) -> None:
        """Until every thread has finished one request (or `timeout_s`)."""
        deadline = time.time() + timeout_s
        while len(self.samples) < self.concurrency and time.time() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=JOIN_TIMEOUT_S)

    @property
    def failures(self) -> list[str]:
        return [s.detail for s in self.samples if not s.ok]

    def summary(self, since: float, where: str = "", counted: str = "") -> str:
        """The probe's requests that ended after `since`, for an artifact's notes."""
        done = [s for s in self.samples if s.end >= since]
        ttfab = [s.ttfab_ms for s in done if s.ttfab_ms is not None]
        p95 = f"{np.percentile(ttfab, 95):.0f} ms" if ttfab else "-"
        return (
            f"probe at {self.concurrency}{where}: {len(done)} requests{counted}, "
            f"{len(done) - len(ttfab)} failed, p95 TTFAB {p95}"
        )
