"""Names of the observability resources beside the scaling ones in `deployment`.

The observability component creates them; `drift` can look them up by these names.
"""

from __future__ import annotations

from typing import Final

from tts_bench.deployment import DEFAULT_VARIANT

FIRST_CHUNK_P95_STATISTIC: Final = "p95"
# SageMaker's own per-variant metrics (namespace AWS/SageMaker) the dashboard and alarms use.
SAGEMAKER_INVOCATIONS: Final = "Invocations"
SAGEMAKER_5XX: Final = "Invocation5XXErrors"
SAGEMAKER_4XX: Final = "Invocation4XXErrors"
# Instance-level metrics live in another namespace; CPUUtilization's sample count per minute
# is one per instance, which is the closest thing to an instance-count metric SageMaker emits.
SAGEMAKER_INSTANCE_NAMESPACE: Final = "/aws/sagemaker/Endpoints"
SAGEMAKER_CPU: Final = "CPUUtilization"


def first_chunk_alarm_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return f"{endpoint}-{variant}-FirstChunkLatencyP95"


def queue_saturation_alarm_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return f"{endpoint}-{variant}-queue-saturated"


def server_errors_alarm_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return f"{endpoint}-{variant}-5xx"


def dashboard_name(endpoint: str) -> str:
    return f"{endpoint}-speech"
