"""The one AWS layer: boto3 clients made once per command, and AWS failures as one clear line.

`AwsSession` resolves the region and endpoint from the usual AWS settings (`--region`,
`AWS_REGION`, `AWS_DEFAULT_REGION`, the profile; `AWS_ENDPOINT_URL` and its per-service
variants point every call at an emulator), builds each client once with pooled connections and
adaptive retries, and sends every call through `call` / `paginate`, which turn botocore's
exceptions into `AwsError`: what failed, for which resource, what to do. Nothing else in
`tts_bench` talks to boto3 directly.

boto3 is imported inside the functions that need it, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from tts_bench.errors import TtsBenchError

MAX_POOL_CONNECTIONS: Final = 32
# Total attempts per call when neither AWS_MAX_ATTEMPTS nor the profile says otherwise.
DEFAULT_MAX_ATTEMPTS: Final = 6
CONNECT_TIMEOUT_S: Final = 5
READ_TIMEOUT_S: Final = 30

# The IAM action prefix of each service we call, for "grant X" advice.
_IAM_PREFIX: Final = {
    "sagemaker": "sagemaker",
    "application-autoscaling": "application-autoscaling",
    "cloudwatch": "cloudwatch",
    "logs": "logs",
    "service-quotas": "servicequotas",
    "sts": "sts",
}

_THROTTLING_CODES: Final = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "SlowDown",
        "RateExceeded",
    }
)
_DENIED_CODES: Final = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "NotAuthorized"}
)
_BAD_CREDENTIAL_CODES: Final = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
    }
)


class AwsError(TtsBenchError):
    """An AWS call failed; the message names the call, the resource and the fix."""


class EndpointNotFoundError(AwsError):
    """The SageMaker endpoint a command was pointed at does not exist in this region."""


def _is_missing_endpoint(code: str, message: str) -> bool:
    # SageMaker answers a missing endpoint with a ValidationException, not a NotFound code.
    lowered = message.lower()
    return code in ("ValidationException", "ResourceNotFound", "ResourceNotFoundException") and (
        "could not find endpoint" in lowered or ("endpoint" in lowered and "not found" in lowered)
    )


def explain(
    exc: BaseException, *, service: str, operation: str, resource: str, region: str | None
) -> AwsError | None:
    """The one-line `AwsError` for a botocore exception, or None when it is not botocore's."""
    from botocore import exceptions as bx

    action = f"{_IAM_PREFIX.get(service, service)}:{operation}"
    where = f"{action} on {resource}"
    if isinstance(exc, bx.NoRegionError):
        return AwsError(
            f"{where}: no AWS region configured; set AWS_REGION (or AWS_DEFAULT_REGION) "
            "or pass --region"
        )
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return AwsError(
            f"{where}: no AWS credentials found; set AWS_PROFILE (after `aws sso login`) or "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(exc, bx.CredentialRetrievalError | bx.TokenRetrievalError | bx.ProfileNotFound):
        return AwsError(
            f"{where}: cannot load AWS credentials ({exc}); fix the profile or log in again"
        )
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError):
        url = getattr(exc, "kwargs", {}).get("endpoint_url", "the AWS endpoint")
        return AwsError(
            f"{where}: cannot connect to {url}; check the network, the region, and "
            "AWS_ENDPOINT_URL if you point at an emulator"
        )
    if isinstance(exc, bx.ReadTimeoutError | bx.ConnectionClosedError):
        return AwsError(f"{where}: the connection dropped ({exc}); re-run the command")
    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")).strip()
        attempts = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) + 1
        if code in _THROTTLING_CODES:
            return AwsError(
                f"{where}: throttled by AWS ({code}) after {attempts} attempt(s); wait a minute "
                "and re-run, or raise AWS_MAX_ATTEMPTS"
            )
        if code in _DENIED_CODES:
            return AwsError(
                f"{where}: access denied; grant {action} to the caller's IAM role or user"
            )
        if code in _BAD_CREDENTIAL_CODES:
            return AwsError(
                f"{where}: AWS rejected the credentials ({code}); refresh them "
                "(`aws sso login`, or new access keys)"
            )
        if service == "sagemaker" and _is_missing_endpoint(code, message):
            return EndpointNotFoundError(
                f"{where}: no such SageMaker endpoint in {region or 'this region'}; check "
                "--endpoint and AWS_REGION"
            )
        return AwsError(f"{where}: {code or 'error'}: {message or exc}")
    if isinstance(exc, bx.BotoCoreError):
        return AwsError(f"{where}: {exc}")
    return None


@contextlib.contextmanager
def aws_errors(
    *, service: str, operation: str, resource: str, region: str | None = None
) -> Iterator[None]:
    """Turn any botocore failure inside the block into one `AwsError` line."""
    try:
        yield
    except Exception as exc:
        mapped = explain(
            exc, service=service, operation=operation, resource=resource, region=region
        )
        if mapped is None:
            raise
        raise mapped from None


def _to_operation(method: str) -> str:
    """`describe_scalable_targets` → `DescribeScalableTargets` (the IAM action's name)."""
    return "".join(part.capitalize() for part in method.split("_"))


@dataclass
class AwsSession:
    """The AWS clients of one command: made once, pooled, with adaptive retries.

    Use `AwsSession.from_environment(region)` at the start of a command and pass the object to
    whatever needs AWS; call AWS only through `call` and `paginate` so every failure becomes
    one `AwsError` line.
    """

    region: str
    _boto: Any = field(repr=False)
    _core: Any = field(repr=False)
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_environment(cls, region: str | None = None) -> AwsSession:
        import boto3
        import botocore.session

        # botocore reads AWS_DEFAULT_REGION and the profile; the other SDKs' AWS_REGION comes first.
        chosen = region or os.environ.get("AWS_REGION") or None
        from botocore.exceptions import ProfileNotFound

        try:
            core = botocore.session.Session()
            boto = boto3.session.Session(botocore_session=core, region_name=chosen)
        except ProfileNotFound as exc:
            raise AwsError(
                f"AWS profile {exc.kwargs.get('profile')!r} not found in the AWS config files; "
                "fix AWS_PROFILE or add the profile (`aws configure --profile NAME`)"
            ) from None
        if not boto.region_name:
            raise AwsError(
                "no AWS region configured; set AWS_REGION (or AWS_DEFAULT_REGION) or pass --region"
            )
        return cls(region=boto.region_name, _boto=boto, _core=core)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            from botocore.config import Config

            retries: dict[str, Any] = {"mode": "adaptive"}
            # Keep AWS_MAX_ATTEMPTS / the profile's max_attempts when set; otherwise our default.
            if self._core.get_config_variable("max_attempts") is None:
                retries["total_max_attempts"] = DEFAULT_MAX_ATTEMPTS
            config = Config(
                max_pool_connections=MAX_POOL_CONNECTIONS,
                retries=retries,
                connect_timeout=CONNECT_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S,
            )
            with aws_errors(
                service=service, operation="(client)", resource=f"region {self.region}"
            ):
                self._clients[service] = self._boto.client(service, config=config)
        return self._clients[service]

    def measuring_client(self, service: str, *, pool: int, read_timeout_s: float) -> Any:
        """A new client for a measurement's data plane: no retries, `pool` connections.

        A retried request would hide a failure and stretch its latency, so every attempt is
        the only one and a failure surfaces, named by its error code. Not cached: each
        load-generating process makes its own.
        """
        from botocore.config import Config

        config = Config(
            max_pool_connections=max(pool, 1),
            retries={"mode": "standard", "total_max_attempts": 1},
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=read_timeout_s,
        )
        with aws_errors(service=service, operation="(client)", resource=f"region {self.region}"):
            return self._boto.client(service, config=config)

    def endpoint_url(self, service: str) -> str:
        return str(self.client(service).meta.endpoint_url)

    def call(self, service: str, method: str, *, resource: str, **params: Any) -> dict[str, Any]:
        """One AWS call; `resource` names what it is about, for the error line."""
        operation = _to_operation(method)
        with aws_errors(
            service=service, operation=operation, resource=resource, region=self.region
        ):
            response = getattr(self.client(service), method)(**params)
        response.pop("ResponseMetadata", None)
        return response

    def paginate(
        self, service: str, method: str, key: str, *, resource: str, **params: Any
    ) -> list[dict[str, Any]]:
        """Every item under `key` across all pages of a paginated call."""
        operation = _to_operation(method)
        items: list[dict[str, Any]] = []
        with aws_errors(
            service=service, operation=operation, resource=resource, region=self.region
        ):
            for page in self.client(service).get_paginator(method).paginate(**params):
                items.extend(page.get(key, []))
        return items
