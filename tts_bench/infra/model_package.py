"""SageMaker model package ARNs: parse them, and refuse any that names no version.

A Marketplace seller's package (Sonic-3's, issue 39) is deployed by `ModelPackageName`, not by an
image digest. A package version's containers do not change once it is created, so the versioned
ARN is as fixed an identity as a digest; an unversioned one (a package group) is not, and is
refused. The ARN's account is the seller's, never the operator's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tts_bench.artifacts.fingerprint import MODEL_PACKAGE_ARN_PATTERN
from tts_bench.errors import TtsBenchError

_ARN = re.compile(MODEL_PACKAGE_ARN_PATTERN)
_SHAPE = "arn:aws:sagemaker:<region>:<12-digit account>:model-package/<name>/<version>"


class ModelPackageArnError(TtsBenchError):
    """A model package ARN is malformed or names no version."""


@dataclass(frozen=True)
class ModelPackage:
    """One version of a SageMaker model package."""

    arn: str
    region: str
    account: str  # the package owner's (for Marketplace, the seller's)
    name: str
    version: int


def parse_model_package_arn(value: str) -> ModelPackage:
    """The package the versioned ARN `value` names; a one-line error for any other string."""
    match = _ARN.match(value)
    if match is None:
        if _ARN.match(f"{value}/1") is not None:
            raise ModelPackageArnError(
                f"{value!r} names no version; append it (/<version>) so the plan gate can "
                "match one fixed package"
            )
        raise ModelPackageArnError(f"{value!r} is not a model package ARN ({_SHAPE})")
    return ModelPackage(
        arn=value,
        region=match["region"],
        account=match["account"],
        name=match["name"],
        version=int(match["version"]),
    )
