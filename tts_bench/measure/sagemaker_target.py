"""What a live ladder or T_total measures on SageMaker: the endpoint's fingerprint, read from AWS.

DescribeEndpoint → its endpoint config → the variant's Model gives the instance type, the image
digest (from the image URI), the performance env (the Model env less the deployment env) and
the model id (the Model's `tts-bench:model` tag, when the program set one). An endpoint whose
Model runs a local digest is the local cloud: what is measured there is `emulated`; a local
cloud of curve instances says so in its Model's env, and what is measured there is also marked
`curve_modelled` (and Q_max is never measured on it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError

from tts_bench.artifacts.fingerprint import (
    MODEL_PACKAGE_ARN_PATTERN,
    OWN_CONTRACT,
    ContractRef,
    Fingerprint,
    Transport,
)
from tts_bench.artifacts.provenance import ProvenanceKind
from tts_bench.aws.deployed import describe_endpoint
from tts_bench.aws.session import AwsSession
from tts_bench.deployment import TAG_CONTRACT, TAG_MODEL, is_local_image
from tts_bench.errors import RefusalError
from tts_bench.planning.gate import performance_env_of
from tts_bench.telemetry import ENV_INSTANCE_MODEL, ENV_MAX_QUEUE_DEPTH, ENV_RATE_SCALE

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True, slots=True)
class EndpointTarget:
    """One variant of a deployed endpoint, as a measurement sees it."""

    region: str
    endpoint: str
    variant: str
    status: str
    image: str
    fingerprint: Fingerprint
    queue_max_depth: str | None
    desired_instances: int | None
    current_instances: int | None
    emulated: bool
    curve_modelled: bool = False
    rate_scale: float = 1.0  # curve instances serve X(n) / rate_scale: their latencies × it
    contract_tag: str | None = None  # the Model's tts-bench:contract (None: untagged)

    @property
    def provenance_kind(self) -> ProvenanceKind:
        return "emulated" if self.emulated or self.curve_modelled else "measured"

    @property
    def source(self) -> str:
        where = "local cloud" if self.emulated else self.region
        if self.curve_modelled:
            where += ", curve instances"
        return f"sagemaker endpoint {self.endpoint} variant {self.variant} ({where})"

    def under_contract(self, contract: ContractRef | None) -> EndpointTarget:
        """The endpoint as measured under an endpoint contract: AWS does not know which wire
        its container speaks, the command says (`--contract`), and the fingerprint names it. A
        Model the program tagged with another contract is refused: its wire is known."""
        name = OWN_CONTRACT if contract is None else contract.name
        if self.contract_tag is not None and self.contract_tag != name:
            raise RefusalError(
                f"endpoint {self.endpoint}'s Model speaks contract {self.contract_tag} (its "
                f"{TAG_CONTRACT} tag), not {name}; pass --contract {self.contract_tag}"
            )
        return replace(self, fingerprint=self.fingerprint.model_copy(update={"contract": contract}))

    def refuse_curve_modelled(self) -> None:
        if self.curve_modelled:
            raise RefusalError(
                f"endpoint {self.endpoint} runs curve instances (service times from a ladder): "
                "Q_max is only ever measured on the real engine"
            )

    def refuse_curve_check_mismatch(self, curve_check: bool) -> None:
        """`--curve-check` knowingly measures a curve cloud's endpoint; without it, one is refused."""
        if not curve_check:
            self.refuse_curve_modelled()
        elif not self.curve_modelled:
            raise RefusalError(
                f"--curve-check: endpoint {self.endpoint} runs no curve instances; leave the flag "
                "out to measure it"
            )

    def refuse_not_in_service(self) -> None:
        if self.status != "InService":
            raise RefusalError(
                f"endpoint {self.endpoint} is {self.status}, not InService; wait for it "
                "(or run `tts-bench thaw`) before measuring"
            )

    def refuse_bounded(self) -> None:
        if self.queue_max_depth is not None:
            raise RefusalError(
                f"endpoint {self.endpoint}'s Model sets {ENV_MAX_QUEUE_DEPTH}="
                f"{self.queue_max_depth}; Q_max must be measured unbounded: deploy the stack "
                "without a plan (or its bound) first"
            )


def _variant_entry(entries: list[dict[str, Any]], variant: str, what: str) -> dict[str, Any]:
    for entry in entries:
        if entry.get("VariantName") == variant:
            return entry
    names = [e.get("VariantName") for e in entries]
    raise RefusalError(f"{what} has no variant {variant!r}; pass --variant with one of {names}")


def _package_image(session: AwsSession, package: str) -> tuple[str, str]:
    """The image and digest of a model package's (first) inference container, as
    DescribeModelPackage reports them."""
    described = session.call(
        "sagemaker",
        "describe_model_package",
        resource=f"model package {package}",
        ModelPackageName=package,
    )
    containers = (described.get("InferenceSpecification") or {}).get("Containers") or [{}]
    first = containers[0]
    image = str(first.get("Image", ""))
    return image, str(first.get("ImageDigest") or image.partition("@")[2])


def _model_tags(session: AwsSession, model: dict[str, Any]) -> dict[str, str]:
    arn = model.get("ModelArn")
    if not arn:
        return {}
    tags = session.call("sagemaker", "list_tags", resource=f"model {arn}", ResourceArn=arn)
    return {t["Key"]: t["Value"] for t in tags.get("Tags", [])}


def _model_id(tags: dict[str, str], fallback: str) -> str:
    tagged = tags.get(TAG_MODEL)
    if tagged and tagged != fallback:
        raise RefusalError(
            f"endpoint serves model {tagged!r} (its Model's {TAG_MODEL} tag), not {fallback!r}; "
            f"pass --model {tagged}"
        )
    return tagged or fallback


def _on_loopback(url: str) -> bool:
    return (urlparse(url).hostname or "") in _LOOPBACK


def read_endpoint_target(
    session: AwsSession, endpoint: str, variant: str, transport: Transport, model: str
) -> EndpointTarget:
    """Read the variant's fingerprint and state from SageMaker (read-only)."""
    if transport.is_local:
        raise RefusalError(f"--transport {transport.value} measures a local server, not {endpoint}")
    described = describe_endpoint(session, endpoint)
    live = _variant_entry(described.get("ProductionVariants", []), variant, f"endpoint {endpoint}")
    config_name = described["EndpointConfigName"]
    config = session.call(
        "sagemaker",
        "describe_endpoint_config",
        resource=f"endpoint config {config_name}",
        EndpointConfigName=config_name,
    )
    entry = _variant_entry(
        config.get("ProductionVariants", []), variant, f"endpoint config {config_name}"
    )
    model_name = entry["ModelName"]
    described_model = session.call(
        "sagemaker", "describe_model", resource=f"model {model_name}", ModelName=model_name
    )
    container = described_model.get("PrimaryContainer") or next(
        iter(described_model.get("Containers") or []), {}
    )
    image = str(container.get("Image", ""))
    env = {str(k): str(v) for k, v in (container.get("Environment") or {}).items()}
    digest = image.partition("@")[2]
    package = container.get("ModelPackageName")
    if package:  # a vendor's package (issue 39): its identity, and its container's digest
        if not re.match(MODEL_PACKAGE_ARN_PATTERN, str(package)):
            raise RefusalError(
                f"endpoint {endpoint}: cannot fingerprint model {model_name} (model package "
                f"{package!r}): it must deploy a versioned package ARN (…/<name>/<version>)"
            )
        image, digest = _package_image(session, str(package))
    tags = _model_tags(session, described_model)
    try:
        fingerprint = Fingerprint(
            model=_model_id(tags, model),
            instance_type=str(entry.get("InstanceType", "")),
            image_digest=digest,
            performance_env=performance_env_of(env),
            transport=transport,
            model_package=str(package) if package else None,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        what = f"model package {package!r}" if package else f"image {image!r}"
        must = "a versioned package ARN" if package else "an image pinned by digest"
        raise RefusalError(
            f"endpoint {endpoint}: cannot fingerprint model {model_name} ({what}): "
            f"{'.'.join(map(str, first['loc']))}: {first['msg']}; it must deploy {must}"
        ) from None
    runtime_url = session.endpoint_url("sagemaker-runtime")
    return EndpointTarget(
        region=session.region,
        endpoint=endpoint,
        variant=variant,
        status=str(described.get("EndpointStatus", "Unknown")),
        image=image,
        fingerprint=fingerprint,
        queue_max_depth=env.get(ENV_MAX_QUEUE_DEPTH),
        desired_instances=live.get("DesiredInstanceCount"),
        current_instances=live.get("CurrentInstanceCount"),
        emulated=is_local_image(image) or _on_loopback(runtime_url),
        curve_modelled=env.get(ENV_INSTANCE_MODEL) == "curve",
        rate_scale=_rate_scale(env, endpoint),
        contract_tag=tags.get(TAG_CONTRACT),
    )


def _rate_scale(env: dict[str, str], endpoint: str) -> float:
    raw = env.get(ENV_RATE_SCALE, "1")
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise RefusalError(f"endpoint {endpoint}: its Model's {ENV_RATE_SCALE}={raw!r} is no scale")
    return value


def read_target_from_environment(
    region: str | None, endpoint: str, variant: str, transport: Transport, model: str
) -> EndpointTarget:
    """`read_endpoint_target` with a session from the usual AWS settings (the Locust side)."""
    return read_endpoint_target(
        AwsSession.from_environment(region), endpoint, variant, transport, model
    )
