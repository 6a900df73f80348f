"""The Pulumi stack config: the operator's inputs as one typed object, and the stack files.

`__main__.py` reads `pulumi.Config()` into `StackConfig`; `tts-bench preview` and
`tts-bench image push` read and edit the `Pulumi.<stack>.yaml` files directly (no Pulumi CLI).
Every derived number comes from the plan, never from here: this holds operator choices only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from tts_bench.artifacts.fingerprint import CONTRACT_NAME_PATTERN, OWN_CONTRACT
from tts_bench.deployment import DEFAULT_VARIANT, OperatorBounds
from tts_bench.errors import TtsBenchError
from tts_bench.infra.image_ref import (
    EcrImage,
    EcrRepository,
    ImageReferenceError,
    is_tag_only,
    parse_pinned,
    parse_repository,
)
from tts_bench.infra.model_package import (
    ModelPackage,
    ModelPackageArnError,
    parse_model_package_arn,
)
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH

DEFAULT_ENDPOINT = "speech-kokoro-82m"
IMAGE_KEY = "image"
MODEL_PACKAGE_KEY = "modelPackageArn"


class StackConfigError(TtsBenchError):
    """The stack's config or its files are missing or invalid."""


class StackConfig(BaseModel):
    """The operator's inputs for one stack (SPEC §7), as `Pulumi.<stack>.yaml` spells them."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    endpoint_name: str = Field(
        DEFAULT_ENDPOINT, alias="endpointName", pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
    )
    variant_name: str = Field(DEFAULT_VARIANT, alias="variantName", pattern=r"^[a-zA-Z0-9-]{1,63}$")
    model: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    instance_type: str = Field(alias="instanceType", pattern=r"^ml\.[a-z0-9]+\.[a-z0-9]+$")
    # Exactly one of the two: an image this project builds, or a vendor's model package (issue 39).
    image: str | None = Field(
        None, description="ECR reference pinned by digest (bare repository: no endpoint)"
    )
    model_package_arn: str | None = Field(
        None, alias=MODEL_PACKAGE_KEY, description="a versioned SageMaker model package's ARN"
    )
    # The operator's AWS account, for a model package stack only: an image's registry names it,
    # but a Marketplace package's ARN names the seller's. The execution role's log ARNs use it.
    account: str | None = Field(None, pattern=r"^\d{12}$")
    min_instances: PositiveInt = Field(alias="minInstances")
    max_instances: PositiveInt = Field(alias="maxInstances")
    slo_ms: PositiveFloat = Field(alias="sloMs")
    surge_ratio: float = Field(alias="surgeRatio", gt=1.0, lt=1.5)
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    measurements_dir: str = Field("measurements", alias="measurementsDir", min_length=1)
    # Which rule's plan the gate deploys (SPEC §6a): `fleet` unless the stack says otherwise.
    plan_rule: Literal["published", "fleet"] = Field("fleet", alias="planRule")
    model_repo: str = Field("hexgrad/Kokoro-82M", alias="modelRepo", pattern=r"^[\w.-]+/[\w.-]+$")
    # The Hugging Face commit the model cache copies: an image stack's only (a package has none).
    model_revision: str | None = Field(None, alias="modelRevision", pattern=r"^[0-9a-f]{40}$")
    performance_env: dict[str, str] = Field(default_factory=dict, alias="performanceEnv")
    # The endpoint contract its container speaks (issue 39): only a plan measured under the
    # contract of this name gates it. `kokoro` (this project's container) unless it says.
    contract: str = Field(OWN_CONTRACT, pattern=CONTRACT_NAME_PATTERN)
    # False for a first deploy: the repository and the weights must exist before the endpoint.
    deploy_endpoint: bool = Field(True, alias="deployEndpoint")
    # Set only by the local cloud's deploy: the image's digest is the working tree's local
    # digest, so an emulated plan may gate it (never a real stack's; the policy pack refuses).
    local_cloud: bool = Field(False, alias="localCloud")

    @field_validator("image")
    @classmethod
    def _ecr(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parse_repository(value)
            if is_tag_only(value):
                parse_pinned(value)  # refuses, naming the tag
        except ImageReferenceError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("model_package_arn")
    @classmethod
    def _package(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parse_model_package_arn(value)
        except ModelPackageArnError as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _one_artifact(self) -> StackConfig:
        if (self.image is None) == (self.model_package_arn is None):
            raise ValueError(
                f"set exactly one of {IMAGE_KEY} (an image digest) and {MODEL_PACKAGE_KEY} "
                "(a versioned model package)"
            )
        if self.model_package_arn is not None and self.account is None:
            raise ValueError(
                "a modelPackageArn stack needs account (your 12-digit AWS account: the package's "
                "ARN names its seller's)"
            )
        if self.image is not None and self.account is not None:
            raise ValueError("account is for a modelPackageArn stack; an image's registry names it")
        if self.image is not None and self.model_revision is None:
            raise ValueError(
                "an image stack needs modelRevision (the weights' Hugging Face commit to cache)"
            )
        return self

    @field_validator("performance_env")
    @classmethod
    def _no_bound(cls, env: dict[str, str]) -> dict[str, str]:
        if ENV_MAX_QUEUE_DEPTH in env:
            raise ValueError(
                f"{ENV_MAX_QUEUE_DEPTH} comes from the plan; remove it from performanceEnv"
            )
        return env

    @model_validator(mode="after")
    def _pinned_to_deploy(self) -> StackConfig:
        if self.deploy_endpoint and self.image is not None:
            try:
                parse_pinned(self.image)
            except ImageReferenceError as exc:
                raise ValueError(f"image: {exc}") from None
        return self

    @model_validator(mode="after")
    def _ordered_bounds(self) -> StackConfig:
        if self.max_instances < self.min_instances:
            raise ValueError(
                f"maxInstances ({self.max_instances}) is below minInstances ({self.min_instances})"
            )
        return self

    @property
    def pinned_image(self) -> EcrImage:
        if self.image is None:
            raise StackConfigError(f"this stack deploys {self.model_package_arn}, not an image")
        return parse_pinned(self.image)

    @property
    def repository(self) -> EcrRepository:
        if self.image is None:
            raise StackConfigError(f"this stack deploys {self.model_package_arn}, not an image")
        return parse_repository(self.image)

    @property
    def model_package(self) -> ModelPackage | None:
        """The versioned model package the stack deploys, or None for an image stack."""
        if self.model_package_arn is None:
            return None
        return parse_model_package_arn(self.model_package_arn)

    @property
    def bounds(self) -> OperatorBounds:
        return OperatorBounds(min_instances=self.min_instances, max_instances=self.max_instances)

    @classmethod
    def config_keys(cls) -> list[str]:
        """The config keys (without the project namespace), as the stack file spells them."""
        return [f.alias or name for name, f in cls.model_fields.items() if name != "region"]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> StackConfig:
        """Validate `raw` (absent keys left out); every problem becomes one `key: message` line."""
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            lines = [
                f"{'.'.join(str(p) for p in e['loc']) or '(config)'}: "
                + e["msg"].removeprefix("Value error, ")
                for e in exc.errors()
            ]
            raise StackConfigError("invalid stack config: " + "; ".join(lines)) from None


# --------------------------------------------------------------------------- the files


def project_name(program_dir: Path) -> str:
    """`name` from the program's `Pulumi.yaml`."""
    data = _read_yaml(program_dir / "Pulumi.yaml")
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise StackConfigError(f"{program_dir / 'Pulumi.yaml'}: no project `name`")
    return name


def stack_file(program_dir: Path, stack: str) -> Path:
    return program_dir / f"Pulumi.{stack}.yaml"


def stack_values(program_dir: Path, stack: str) -> dict[str, Any]:
    """The stack's config, keys fully namespaced (`project:key`, `aws:region`), values as written."""
    project = project_name(program_dir)
    path = stack_file(program_dir, stack)
    data = _read_yaml(path)
    config = (data or {}).get("config", {}) if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise StackConfigError(f"{path}: `config` must be a mapping")
    return {(key if ":" in key else f"{project}:{key}"): value for key, value in config.items()}


def runtime_config(values: dict[str, Any]) -> dict[str, str]:
    """Stack values as the Pulumi runtime holds them: strings, structured values as JSON."""
    return {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in values.items()
    }


def program_config(values: dict[str, Any], project: str) -> dict[str, Any]:
    """The raw `StackConfig` input from namespaced stack values (what `pulumi.Config` would give)."""
    raw = {
        key: values[f"{project}:{key}"]
        for key in StackConfig.config_keys()
        if f"{project}:{key}" in values
    }
    if "aws:region" in values:
        raw["region"] = values["aws:region"]
    return raw


def set_stack_value(program_dir: Path, stack: str, key: str, value: str) -> Path:
    """Set `project:key` in the stack file, keeping every other line (and comment) as it was."""
    project = project_name(program_dir)
    path = stack_file(program_dir, stack)
    text = path.read_text(encoding="utf-8")
    full = f"{project}:{key}"
    pattern = re.compile(rf"^(?P<indent>[ \t]+){re.escape(full)}:[^\n]*$", re.MULTILINE)
    plain = f"{full}: {value}"
    try:
        safe = _read_yaml_text(plain, path) == {full: value}
    except StackConfigError:
        safe = False
    line = plain if safe else f"{full}: {json.dumps(value)}"  # quote only when YAML needs it
    if pattern.search(text):
        text = pattern.sub(lambda m: m["indent"] + line, text, count=1)
    elif re.search(r"^config:\s*$", text, re.MULTILINE):
        text = re.sub(r"^config:\s*$", f"config:\n  {line}", text, count=1, flags=re.MULTILINE)
    else:
        text = text.rstrip("\n") + f"\nconfig:\n  {line}\n"
    written = _read_yaml_text(text, path)
    if (written or {}).get("config", {}).get(full) != value:
        raise StackConfigError(f"{path}: could not set {full} safely; set it by hand to {value}")
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StackConfigError(f"{path}: no such file") from None
    return _read_yaml_text(text, path)


def _read_yaml_text(text: str, path: Path) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StackConfigError(f"{path}: not valid YAML ({exc})") from None
