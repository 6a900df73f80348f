"""SageMaker runtime error shapes, as botocore parses them (pure: figures in, status/headers/body out).

A container error before the stream starts is a 424 `ModelError` carrying the container's
status and body; other errors name themselves in `x-amzn-ErrorType` with a JSON body.
"""

from __future__ import annotations

import json

from tts_bench.local_cloud.cloudwatch.logs import log_group
from tts_bench.local_cloud.settings import REGION

ERROR_TYPE_HEADER = "x-amzn-ErrorType"
_CORAL = ":http://internal.amazon.com/coral/com.amazon.sagemaker/"

WireError = tuple[int, dict[str, str], bytes]


def error(status: int, error_type: str, message: str, **fields: object) -> WireError:
    body = {"Message": message, **fields}
    return (
        status,
        {ERROR_TYPE_HEADER: error_type + _CORAL, "Content-Type": "application/json"},
        json.dumps(body).encode(),
    )


def model_error(
    endpoint: str, original_status: int, original_body: bytes, log_stream_arn: str, account: str
) -> WireError:
    kind = "client" if original_status < 500 else "server"
    original = original_body.decode("utf-8", errors="replace")
    console = (
        f"https://{REGION}.console.aws.amazon.com/cloudwatch/home?region={REGION}"
        f"#logEventViewer:group={log_group(endpoint)}"
    )
    return error(
        424,
        "ModelError",
        f'Received {kind} error ({original_status}) from primary with message "{original}". '
        f"See {console} in account {account} for more information.",
        ErrorCode=f"{kind.upper()}_ERROR_FROM_MODEL",
        OriginalStatusCode=original_status,
        OriginalMessage=original,
        LogStreamArn=log_stream_arn,
    )


def invocation_timeout(endpoint: str, ceiling_s: float, streaming: bool) -> WireError:
    message = (
        f"ModelInvocationTimeExceeded: the model did not finish within {ceiling_s:g} s "
        f"(endpoint {endpoint})"
    )
    if streaming:
        return error(424, "ModelStreamError", message, ErrorCode="ModelInvocationTimeExceeded")
    return error(424, "ModelError", message, ErrorCode="ModelInvocationTimeExceeded")


def no_endpoint(endpoint: str, account: str) -> WireError:
    return error(400, "ValidationError", f"Endpoint {endpoint} of account {account} not found.")


def no_instance(message: str) -> WireError:
    return error(400, "ValidationError", message)


def payload_too_large(limit_bytes: int) -> WireError:
    return error(
        413,
        "ValidationError",
        f"the request body is larger than the {limit_bytes // (1024 * 1024)} MB an "
        "invocation may carry",
    )


def body_timeout(ceiling_s: float) -> WireError:
    return error(408, "ValidationError", f"the request body did not arrive within {ceiling_s:g} s")


def unreadable_body(reason: str) -> WireError:
    return error(400, "ValidationError", f"the request body could not be read: {reason}")


def stream_broken_message(endpoint: str) -> str:
    return f"the container closed the stream before it finished (endpoint {endpoint})"
