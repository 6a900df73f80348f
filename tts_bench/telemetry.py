"""Names shared by the container's telemetry and everything that reads it.

The serving container emits these in CloudWatch Embedded Metric Format lines; the
observability component builds its dashboard and alarms on them; `ttotal` reads the start-up
markers from the container's logs. One list, imported everywhere. Also how a malformed HTTP
request shows in the logs of the aiohttp servers here (the container and the local cloud's
runtime): a client's mistake, one warning line.
"""

import logging
from typing import Final

NAMESPACE: Final = "SpeechEndpoint"
DIMENSIONS: Final = ("EndpointName", "VariantName")

# Service time from the moment work starts on a request to its first audio chunk (queue wait
# excluded), milliseconds.
FIRST_CHUNK_LATENCY: Final = "FirstChunkLatency"
QUEUE_WAIT: Final = "QueueWait"  # milliseconds from arrival to work starting
IN_FLIGHT: Final = "InFlight"  # queued + executing, the quantity the admission gate bounds
QUEUE_SATURATED: Final = "QueueSaturated"  # count of 503 queue_saturated refusals

METRIC_UNITS: Final = {
    FIRST_CHUNK_LATENCY: "Milliseconds",
    QUEUE_WAIT: "Milliseconds",
    IN_FLIGHT: "Count",
    QUEUE_SATURATED: "Count",
}

# SageMaker's own per-variant metric the scaling policy tracks (namespace AWS/SageMaker).
SAGEMAKER_NAMESPACE: Final = "AWS/SageMaker"
CONCURRENT_REQUESTS_PER_MODEL: Final = "ConcurrentRequestsPerModel"
SAGEMAKER_INVOCATIONS: Final = "Invocations"
# Each invocation adds 1/N, N the variant's active instances: requests per instance.
SAGEMAKER_INVOCATIONS_PER_INSTANCE: Final = "InvocationsPerInstance"
SAGEMAKER_5XX: Final = "Invocation5XXErrors"
SAGEMAKER_4XX: Final = "Invocation4XXErrors"
# Instance-level metrics live in another namespace; CPUUtilization's sample count per minute
# is one per instance, the closest thing to an instance-count metric SageMaker emits.
SAGEMAKER_INSTANCE_NAMESPACE: Final = "/aws/sagemaker/Endpoints"
SAGEMAKER_CPU: Final = "CPUUtilization"
FIRST_CHUNK_P95_STATISTIC: Final = "p95"

# Start-up stage markers, in the order a container passes them. Each is logged once with a
# wall-clock timestamp; T_total's container stages are the gaps between consecutive markers.
STARTUP_MARKERS: Final = (
    "container_started",
    "framework_init",
    "weights_fetched",
    "weights_ready",
    "warmup_done",
    "ready",
)

# The body of a 503 from the admission gate; SageMaker drops Retry-After, so the hint is here.
QUEUE_SATURATED_ERROR: Final = "queue_saturated"
ENV_MAX_QUEUE_DEPTH: Final = "MAX_QUEUE_DEPTH"

# Container env the deployment sets so the server can name itself: the EMF dimensions and the
# build fingerprint /ping reports (on SageMaker the image cannot hash its own digest).
ENV_ENDPOINT_NAME: Final = "ENDPOINT_NAME"
ENV_VARIANT_NAME: Final = "VARIANT_NAME"
ENV_INSTANCE_TYPE: Final = "INSTANCE_TYPE"
ENV_IMAGE_DIGEST: Final = "IMAGE_DIGEST"
# Set on a local cloud's Model whose instances are not the container ("curve": service times
# from a measured ladder), so a measurement reading the Model can tell and refuse or mark it.
ENV_INSTANCE_MODEL: Final = "TTS_BENCH_INSTANCE_MODEL"
# Beside it: the curve instances' rate scale S (every X(n) divided by S), which whatever reads
# their latencies or replays their service must apply too.
ENV_RATE_SCALE: Final = "TTS_BENCH_RATE_SCALE"
# Container env that is deployment config, never part of a fingerprint's performance env.
DEPLOYMENT_ENV: Final = frozenset(
    {
        ENV_MAX_QUEUE_DEPTH,
        ENV_ENDPOINT_NAME,
        ENV_VARIANT_NAME,
        ENV_INSTANCE_TYPE,
        ENV_IMAGE_DIGEST,
        ENV_INSTANCE_MODEL,
        ENV_RATE_SCALE,
    }
)


class MalformedHttpIsAWarning(logging.Filter):
    """aiohttp logs every malformed HTTP request at error level with a traceback; that is
    the client's mistake, not the server's, and must not trip error-log alarms. It becomes a
    warning line with the parser's one-line reason and no traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = record.exc_info[1] if record.exc_info else None
        if record.name.startswith("aiohttp") and isinstance(exc, HttpProcessingError):
            reason = " ".join(str(exc.message or type(exc).__name__).split())
            record.msg = (
                f"{record.getMessage()}: malformed HTTP request ({exc.code}): {reason[:300]}"
            )
            record.args = ()
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True
