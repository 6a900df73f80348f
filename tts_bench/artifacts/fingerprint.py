"""Build fingerprints: what a measurement was taken against, and the file names derived from it.

A fingerprint names the model, the instance type, the image digest (and, for a vendor's model
package, the package's versioned ARN), the container settings that change performance, the
transport the client used and, when it is not this project's own, the endpoint contract the
requests and events followed. Two artifacts pair only when their fingerprints agree (SPEC §5);
the slug in each file name keeps a second configuration from overwriting the first.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tts_bench.telemetry import DEPLOYMENT_ENV

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
CONTRACT_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}$"
# A versioned SageMaker model package (AWS partitions, regions and 12-digit accounts; a name of
# 1-63 alphanumerics and hyphens; a positive version). Named groups for `infra.model_package`.
MODEL_PACKAGE_ARN_PATTERN = (
    r"^arn:aws(?:-[a-z]+)*:sagemaker:(?P<region>[a-z]{2}(?:-[a-z]+)+-\d):(?P<account>\d{12}):"
    r"model-package/(?P<name>[a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62})/(?P<version>[1-9]\d{0,9})$"
)
OWN_CONTRACT = "kokoro"  # this project's container's: never named in a fingerprint
_MODEL_PATTERN = r"^[a-z0-9][a-z0-9.-]*$"


class Transport(StrEnum):
    """How the client reaches the model; the same names appear in flags and file names."""

    LOCAL_HTTP = "local-http"  # `tts-bench serve` over HTTP, jsonlines stream
    LOCAL_WS = "local-ws"  # `tts-bench serve` over its WebSocket
    RESPONSE_STREAM = "response-stream"  # SageMaker InvokeEndpointWithResponseStream
    BIDI_STREAM = "bidi-stream"  # SageMaker bidirectional streaming

    @property
    def is_local(self) -> bool:
        return self in (Transport.LOCAL_HTTP, Transport.LOCAL_WS)


class ContractRef(BaseModel):
    """The endpoint contract a measurement was read under (issue 39), when not this project's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=CONTRACT_NAME_PATTERN, description="e.g. sonic3")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="of the contract's canonical JSON")

    def __str__(self) -> str:
        return f"{self.name}@{self.sha256[:12]}"


class Fingerprint(BaseModel):
    """What a measurement was taken against. Frozen: it is an identity, not a record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(pattern=_MODEL_PATTERN, description="model id, e.g. kokoro-82m")
    instance_type: str = Field(
        min_length=1, description="ml.g5.xlarge, or local-<cpu or gpu model> for local runs"
    )
    image_digest: str = Field(pattern=DIGEST_PATTERN, description="sha256:<64 hex>")
    performance_env: dict[str, str] = Field(
        default_factory=dict,
        description="container env that changes performance (engine mode, batch settings)",
    )
    transport: Transport
    # Absent (and never written) for this project's own contract: every artifact measured before
    # contracts keeps its bytes, and a plan of another contract never pairs with one of Kokoro.
    contract: ContractRef | None = Field(
        default=None,
        exclude_if=lambda ref: ref is None,
        description="the endpoint contract, when not this project's (kokoro)",
    )

    # Set when the measured endpoint ran a vendor's model package (issue 39): the versioned ARN is
    # then the identity, beside the digest of its container. Absent (never written) for an image
    # this project deployed, so every image artifact keeps its bytes and no plan of a package
    # pairs with one of an image.
    model_package: str | None = Field(
        default=None,
        pattern=MODEL_PACKAGE_ARN_PATTERN,
        exclude_if=lambda arn: arn is None,
        description="the versioned model package ARN, when a package was deployed",
    )

    @field_validator("performance_env")
    @classmethod
    def _no_deployment_config(cls, env: dict[str, str]) -> dict[str, str]:
        # Q_max is measured unbounded and deployed bounded: the bound (like the endpoint's own
        # name and digest) is deployment config, not part of what was measured.
        if deployment := sorted(DEPLOYMENT_ENV & env.keys()):
            raise ValueError(
                f"{', '.join(deployment)} is deployment config, not a performance setting"
            )
        return dict(sorted(env.items()))

    @property
    def contract_name(self) -> str:
        """The endpoint contract's name: `kokoro` when the fingerprint names none."""
        return OWN_CONTRACT if self.contract is None else self.contract.name

    @property
    def deployed(self) -> str:
        """What was deployed, as the gate names it: the model package ARN, else the image digest."""
        return self.model_package or self.image_digest

    @property
    def short_digest(self) -> str:
        return self.image_digest.removeprefix("sha256:")[:8]

    @property
    def env_hash(self) -> str | None:
        """Six hex of the performance env, or None when there is none."""
        if not self.performance_env:
            return None
        canonical = json.dumps(self.performance_env, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:6]

    @property
    def slug(self) -> str:
        """`g5xlarge-8b1b96bc`, plus `-<env hash>` when the performance env is not empty and
        `-<contract><6 hex>` under another contract than Kokoro's, `-pkg<6 hex>` for a package."""
        parts = [condense_instance_type(self.instance_type), self.short_digest]
        if self.env_hash:
            parts.append(self.env_hash)
        if self.contract is not None:
            parts.append(f"{self.contract.name}{self.contract.sha256[:6]}")
        if self.model_package is not None:
            parts.append(f"pkg{hashlib.sha256(self.model_package.encode()).hexdigest()[:6]}")
        return "-".join(parts)

    def same_build(self, other: Fingerprint) -> bool:
        """Everything but the transport agrees."""
        return (
            self.model == other.model
            and self.instance_type == other.instance_type
            and self.image_digest == other.image_digest
            and self.performance_env == other.performance_env
            and self.contract == other.contract
            and self.model_package == other.model_package
        )

    def _shown(self, name: str) -> str:
        value = getattr(self, name)
        if value is None:
            return {"contract": OWN_CONTRACT, "model_package": "(an image)"}[name]
        return str(value)

    def differences(self, other: Fingerprint) -> list[str]:
        """Human-readable `field: a != b` for each field that differs."""
        return [
            f"{name}: {self._shown(name)} != {other._shown(name)}"
            for name in (
                "model",
                "instance_type",
                "image_digest",
                "performance_env",
                "transport",
                "contract",
                "model_package",
            )
            if getattr(self, name) != getattr(other, name)
        ]


def condense_instance_type(instance_type: str) -> str:
    """`ml.g5.xlarge` → `g5xlarge`; `local-AMD EPYC 7B13` → `localamdepyc7b13`."""
    return re.sub(r"[^a-z0-9]", "", instance_type.lower().removeprefix("ml."))


# Appended to the slug of an artifact measured through the local cloud, so an emulated file
# never takes the name of a measured or reference one of the same fingerprint.
EMULATED_SLUG_MARKER = "emulated"


def file_slug(fp: Fingerprint, provenance_kind: str = "measured") -> str:
    """The fingerprint's slug, marked `-emulated` for an emulated artifact."""
    if provenance_kind == EMULATED_SLUG_MARKER:
        return f"{fp.slug}-{EMULATED_SLUG_MARKER}"
    return fp.slug


def qmax_filename(fp: Fingerprint, provenance_kind: str = "measured") -> str:
    return f"qmax-{fp.model}-{fp.transport.value}-{file_slug(fp, provenance_kind)}.json"


def ttotal_filename(fp: Fingerprint, trigger: str, provenance_kind: str = "measured") -> str:
    return f"ttotal-{fp.model}-{trigger}-{file_slug(fp, provenance_kind)}.json"


def plan_filename(
    fp: Fingerprint, provenance_kind: str = "measured", rule: str = "published"
) -> str:
    """`plan-<model>-<slug>.json`; a fleet plan of the same build `plan-<model>-fleet-<slug>.json`."""
    kind = "" if rule == "published" else f"{rule}-"
    return f"plan-{fp.model}-{kind}{file_slug(fp, provenance_kind)}.json"
