"""The `response-stream` transport's client side: InvokeEndpointWithResponseStream through boto3.

Shared by the Locust user (`loadtest/sagemaker_users.py`), the surge and the T_total probe, so
each reads a stream the same way (its events through `stream_events`):
- one client per load-generating process, `max_pool_connections` at least its users, retries
  off: a retried request would hide a failure and stretch its latency, so every attempt is the
  only one and a failure is a failed sample named by its error code;
- PayloadParts re-joined and split at newlines (SageMaker's parts need not align with the
  container's NDJSON lines), each line handed on as it completes;
- a `ModelStreamError` mid-stream (botocore `EventStreamError`), a cut connection (urllib3
  `ProtocolError`) and a stall (`ReadTimeoutError`) named after the exception.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

from tts_bench.aws.session import AwsSession
from tts_bench.measure.transport.stream_events import KOKORO_EVENTS, EventRules, Outcome

# The runtime ends every invocation within SageMaker's 60 s ceiling; past 70 s it is a stall.
READ_TIMEOUT_S: Final = 70.0
CONTENT_TYPE: Final = "application/json"
ACCEPT: Final = "application/jsonlines"


class StreamEventError(Exception):
    """The stream carried an event other than a PayloadPart (an error event botocore let by)."""


def runtime_client(region: str | None, pool: int, read_timeout_s: float = READ_TIMEOUT_S) -> Any:
    """A load-generating process's `sagemaker-runtime` client: `pool` connections, no retries."""
    return AwsSession.from_environment(region).measuring_client(
        "sagemaker-runtime", pool=pool, read_timeout_s=read_timeout_s
    )


def invoke(client: Any, endpoint: str, body: dict[str, Any], variant: str | None = None) -> Any:
    """Start one streamed invocation; returns botocore's event stream (close it when done)."""
    extra = {"TargetVariant": variant} if variant else {}
    response = client.invoke_endpoint_with_response_stream(
        EndpointName=endpoint,
        Body=json.dumps(body).encode(),
        ContentType=CONTENT_TYPE,
        Accept=ACCEPT,
        **extra,
    )
    return response["Body"]


def payload_lines(stream: Any) -> Iterator[bytes]:
    """Complete NDJSON lines from the stream's PayloadParts, each as soon as its newline arrives."""
    buffer = b""
    for event in stream:
        part = event.get("PayloadPart")
        if part is None:
            name = next(iter(event), "unknown")
            raise StreamEventError(f"{name}: {json.dumps(event.get(name), default=str)[:200]}")
        buffer += part.get("Bytes", b"")
        while (cut := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:cut], buffer[cut + 1 :]
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def failure_of(exc: BaseException, rules: EventRules = KOKORO_EVENTS) -> tuple[str, Outcome] | None:
    """A failed sample's (detail, outcome) for what a streamed invocation may raise, else None.

    A ModelError is a refusal when its `OriginalStatusCode` (and message) is one under `rules`.
    """
    from botocore.exceptions import BotoCoreError, ClientError, EventStreamError
    from urllib3.exceptions import ProtocolError, ReadTimeoutError

    if isinstance(exc, EventStreamError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or "ModelStreamError"
        return f"EventStreamError: {code}: {error.get('Message', '')}".strip(), Outcome.ERROR
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "error")
        original = exc.response.get("OriginalStatusCode")
        message = str(exc.response.get("OriginalMessage") or error.get("Message") or "")
        status = f" (container {original})" if original else ""
        return f"{code}{status}: {message[:200]}", rules.refusal_outcome(original, message)
    if isinstance(exc, StreamEventError):
        return f"StreamEventError: {exc}", Outcome.ERROR
    if isinstance(exc, ProtocolError | ReadTimeoutError | BotoCoreError):
        return f"{type(exc).__name__}: {exc}"[:300], Outcome.ERROR
    return None
