"""The control plane's front door: what AWS refuses with a 4xx never reaches moto.

moto trusts its input: a JSON body that is a list, an unknown operation, a field of the wrong
type or a chunked body that does not parse raised inside it, and the client got a 500 with a
traceback in the log. `AwsRequestGuard` wraps moto's WSGI app and checks each request as AWS's
front end would, before moto sees it:

- the body is read whole (a broken chunked encoding or a cut body is a 400; more than
  `MAX_BODY_BYTES` a 413);
- a JSON-protocol call (`X-Amz-Target: <prefix>.<Operation>`, the protocol of every control
  plane client the local cloud serves) names an operation of that service's botocore model
  (else `UnknownOperationException`), has a JSON object as its body, with finite numbers and
  nesting the parser can follow (else `SerializationException`), and its parameters pass
  botocore's own validation of that operation's input shape: types, required members, minimum
  values and lengths (else `ValidationException`, the report as its message).

The checks come from botocore's service models, the same contract the real services publish,
and from what AWS refuses beyond them where moto would fail instead (`check_beyond_the_model`:
next tokens it never issued, a metric query without its namespace or name), each with the
error that operation documents. A request that still makes moto raise (none the fuzz in
`tests/local_cloud/test_control_plane_fuzz.py` finds) is a 500 `InternalFailure` with one
warning line naming the operation, not a traceback.
"""

from __future__ import annotations

import io
import json
import logging
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

MAX_BODY_BYTES = 16 * 1024 * 1024
JSON_SERVICES = ("sagemaker", "application-autoscaling", "cloudwatch", "logs")

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class Refusal(Exception):
    """A request AWS would refuse: its status, error type and message."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


@cache
def _models_by_target_prefix() -> Mapping[str, Any]:
    import botocore.session

    session = botocore.session.get_session()
    models = (session.get_service_model(name) for name in JSON_SERVICES)
    return {m.metadata["targetPrefix"]: m for m in models if m.metadata.get("targetPrefix")}


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """The body of a JSON-protocol call: an object (an empty body is an empty one)."""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise Refusal(400, "SerializationException", "the body nests too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise Refusal(400, "SerializationException", f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise Refusal(400, "SerializationException", "the body is not a JSON object")
    return body


def check_json_call(target: str, raw: bytes) -> None:
    """Refuse a JSON-protocol call AWS would refuse; silent for a well-formed one, and for a
    target prefix of a service this guard does not know (moto answers those)."""
    from botocore.model import OperationNotFoundError
    from botocore.validate import ParamValidator

    prefix, _, operation = target.partition(".")
    model = _models_by_target_prefix().get(prefix)
    if model is None:
        return
    try:
        shape = model.operation_model(operation).input_shape
    except OperationNotFoundError:
        raise Refusal(
            400, "UnknownOperationException", f"{model.service_name} has no operation {operation!r}"
        ) from None
    body = parse_json_body(raw)
    if shape is None:
        return
    report = ParamValidator().validate(body, shape)
    if report.has_errors():
        message = " ".join(report.generate_report().split())
        raise Refusal(400, "ValidationException", message[:2000])
    check_beyond_the_model(target, body)


# Paginated calls whose tokens are page offsets (moto's, and the scaling history's fronted
# calls): any other token is one the local cloud never issued, refused with the error each
# operation's model documents (moto and the history would parse it as a number and fail).
TOKEN_ERRORS = {
    "AnyScaleFrontendService.DescribeScalableTargets": "InvalidNextTokenException",
    "AnyScaleFrontendService.DescribeScalingPolicies": "InvalidNextTokenException",
    "AnyScaleFrontendService.DescribeScalingActivities": "InvalidNextTokenException",
    "GraniteServiceVersion20100801.DescribeAlarmHistory": "InvalidNextToken",
}
TOKEN_MESSAGE = "The next token supplied was invalid."
GET_METRIC_DATA = "GraniteServiceVersion20100801.GetMetricData"
CREATE_ENDPOINT_CONFIG = "SageMaker.CreateEndpointConfig"


def check_beyond_the_model(target: str, body: dict[str, Any]) -> None:
    """What AWS refuses although the model allows it, where moto would fail on it instead:
    a next token it never issued; a GetMetricData metric without its namespace or name
    (optional in the model's `Metric` shape, required by the service: `MissingParameter`,
    CloudWatch's documented error for a missing parameter); an endpoint config variant without
    a model (optional in the model for inference components, which the local cloud does not
    emulate: SageMaker's `ValidationException`)."""
    token = body.get("NextToken")
    if target in TOKEN_ERRORS and token is not None and not (token.isascii() and token.isdigit()):
        raise Refusal(400, TOKEN_ERRORS[target], TOKEN_MESSAGE)
    if target == GET_METRIC_DATA:
        for n, query in enumerate(body.get("MetricDataQueries", []), start=1):
            metric = query.get("MetricStat", {}).get("Metric")
            for field in ("Namespace", "MetricName"):
                if metric is not None and field not in metric:
                    raise Refusal(
                        400,
                        "MissingParameter",
                        f"MetricDataQueries.member.{n}.MetricStat.Metric.{field} is required",
                    )
    if target == CREATE_ENDPOINT_CONFIG:
        for n, variant in enumerate(body.get("ProductionVariants", []), start=1):
            if "ModelName" not in variant:
                raise Refusal(
                    400,
                    "ValidationException",
                    f"ProductionVariants.{n}.ModelName is required: the local cloud serves a "
                    "model per variant (inference components are not emulated)",
                )


def _read_body(environ: dict[str, Any]) -> bytes:
    """The whole body, framing checked (werkzeug de-chunks; a bad chunk is an OSError)."""
    from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
    from werkzeug.wrappers import Request

    request = Request(environ)
    request.max_content_length = MAX_BODY_BYTES
    try:
        return request.get_data(cache=False)
    except RequestEntityTooLarge:
        raise Refusal(
            413, "RequestEntityTooLarge", f"the body is larger than {MAX_BODY_BYTES} bytes"
        ) from None
    except (HTTPException, OSError, ValueError) as exc:  # a cut body: werkzeug's 400
        reason = getattr(exc, "description", None) or exc
        raise Refusal(
            400, "SerializationException", f"the body could not be read: {reason}"
        ) from None


def _answer(start_response: StartResponse, refusal: Refusal, *exc_info: Any) -> list[bytes]:
    body = json.dumps({"__type": refusal.error_type, "message": refusal.message}).encode()
    reason = {400: "Bad Request", 413: "Request Entity Too Large", 500: "Internal Server Error"}
    headers = [
        ("Content-Type", "application/x-amz-json-1.1"),
        ("x-amzn-ErrorType", refusal.error_type),
        ("Content-Length", str(len(body))),
    ]
    start_response(f"{refusal.status} {reason.get(refusal.status, 'Error')}", headers, *exc_info)
    return [body]


class AwsRequestGuard:
    """WSGI middleware in front of moto's app (see the module's docstring)."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        try:
            raw = _read_body(environ)
            if target and "json" in environ.get("CONTENT_TYPE", "json"):
                check_json_call(target, raw)
        except Refusal as refusal:
            return _answer(start_response, refusal)
        try:
            environ["wsgi.input"] = io.BytesIO(raw)
            environ["CONTENT_LENGTH"] = str(len(raw))
            environ.pop("HTTP_TRANSFER_ENCODING", None)
            environ["wsgi.input_terminated"] = False
            return list(self.app(environ, start_response))
        except Exception as exc:
            operation = target or f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')}"
            log.warning("moto failed on %s: %s: %s", operation, type(exc).__name__, exc)
            failure = Refusal(
                500, "InternalFailure", f"the local cloud's moto failed on {operation}"
            )
            return _answer(start_response, failure, sys.exc_info())
