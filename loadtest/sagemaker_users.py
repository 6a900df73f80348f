"""The `response-stream` ladder user: SageMaker InvokeEndpointWithResponseStream through boto3.

Each Locust process makes one `sagemaker-runtime` client, with as many pooled connections as the
ladder's largest rung and retries off; streams are read by `tts_bench.measure.response_stream`
(PayloadParts re-split at newlines, failures named by error code or exception). TTFAB is the
arrival of the first `chunk` event, the first that carries audio. boto3's blocking reads run
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

from locust import User, events, task
from locust.env import Environment

from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ladder import parse_rungs
from tts_bench.measure.response_stream import failure_of, invoke, payload_lines, runtime_client


@dataclass(frozen=True)
class LadderHooks:
    """The ladder file's per-request machinery, handed to a transport's user class."""

    timed_request: Callable[[Environment], AbstractContextManager[Any]]
    read_event: Callable[[bytes | str, Any, str], bool]
    utterances: Callable[[Environment], Iterator[Utterance]]


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
        body = next(self.texts).request(context_id)
        stream = None
        with self.hooks.timed_request(self.environment) as timing:
            try:
                stream = invoke(runtime.client, runtime.endpoint, body, runtime.variant)
                finished = False
                # Read to the stream's end even after `done`: its connection then goes back
                # to the pool instead of being closed under the runtime's last frame.
                for line in payload_lines(stream):
                    finished = finished or self.hooks.read_event(line, timing, context_id)
            except Exception as exc:
                failure = failure_of(exc)
                if failure is None:
                    raise
                timing.fail(*failure)
            finally:
                if stream is not None:
                    stream.close()


@events.init_command_line_parser.add_listener
def add_variant_argument(parser: Any, **_kw: Any) -> None:
    parser.add_argument(
        "--variant",
        default=None,
        help="SageMaker production variant (default: AllTraffic for the fingerprint, the "
        "endpoint's own routing for requests)",
        include_in_web_ui=False,
    )
