"""The `response-stream` ladder user: SageMaker InvokeEndpointWithResponseStream through boto3.

Each Locust process makes one `sagemaker-runtime` client, with as many pooled connections as the
ladder's largest rung and retries off; streams are read by `tts_bench.measure.transport.response_stream`
(PayloadParts re-split at newlines, failures named by error code or exception). TTFAB is the
arrival of the first event that carries audio under the ladder's contract; a ModelError whose
`OriginalStatusCode` the contract calls a refusal (Sonic-3: 429) is a rejected sample. boto3's blocking reads run
under Locust's gevent patching, so every user's stream proceeds concurrently.

The class is abstract: `loadtest/qmax.py` binds it to its request timing (`LadderHooks`), so this
file needs nothing from the ladder file.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from locust import User, task
from locust.env import Environment

from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ladder.schedule import parse_rungs
from tts_bench.measure.transport.response_stream import (
    failure_of,
    invoke,
    payload_lines,
    runtime_client,
)
from tts_bench.measure.transport.stream_events import StreamReading


@dataclass(frozen=True)
class LadderHooks:
    """The ladder file's per-request machinery, handed to a transport's user class:
    `timed_request(environment, context_id)` yields the request's `StreamReading` (which reads
    events under the ladder's `--contract`), `body(environment, utterance, context_id)` is the
    request the contract builds for a corpus line."""

    timed_request: Callable[[Environment, str], AbstractContextManager[StreamReading]]
    utterances: Callable[[Environment], Iterator[Utterance]]
    body: Callable[[Environment, Utterance, str], dict[str, Any]]


@dataclass(frozen=True)
class RuntimeClient:
    """The process's one `sagemaker-runtime` client and what it invokes."""

    client: Any
    endpoint: str
    variant: str | None


def runtime_of(environment: Environment) -> RuntimeClient:
    """This process's client, made on first use with a pool as large as the largest rung."""
    runtime = getattr(environment, "sagemaker_runtime", None)
    if runtime is None:
        options = environment.parsed_options
        runtime = RuntimeClient(
            client=runtime_client(options.region, max(parse_rungs(options.rungs))),
            endpoint=options.endpoint,
            variant=options.variant,
        )
        environment.sagemaker_runtime = runtime  # type: ignore[attr-defined]
    return runtime


class ResponseStreamUser(User):
    """response-stream: one InvokeEndpointWithResponseStream at a time, no think time."""

    abstract = True
    hooks: ClassVar[LadderHooks]

    def on_start(self) -> None:
        self.texts = self.hooks.utterances(self.environment)

    @task
    def speak(self) -> None:
        runtime = runtime_of(self.environment)
        context_id = uuid.uuid4().hex[:12]
        body = self.hooks.body(self.environment, next(self.texts), context_id)
        stream = None
        with self.hooks.timed_request(self.environment, context_id) as reading:
            try:
                stream = invoke(runtime.client, runtime.endpoint, body, runtime.variant)
                # Read to the stream's end even after `done`: its connection then goes back
                # to the pool instead of being closed under the runtime's last frame.
                for line in payload_lines(stream):
                    reading.feed(line)
            except Exception as exc:
                failure = failure_of(exc, reading.rules)
                if failure is None:
                    raise
                reading.fail(*failure)
            finally:
                if stream is not None:
                    stream.close()
