"""Images are pinned by digest: a tag can be moved to another build after it was measured. A
model package (fixed by its versioned ARN) runs network-isolated, as Marketplace requires."""

from __future__ import annotations

import re

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from tts_policies.preview_values import read, unknowns_reported
from tts_policies.resource_types import SAGEMAKER_MODEL

NAME = "images-pinned-by-digest"
_PINNED = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")


def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != SAGEMAKER_MODEL:
        return
    with unknowns_reported(report_violation, f"model {args.name}"):
        images: list[tuple[str, str]] = []
        primary = read(args.props, "primaryContainer", "image", default=None)
        if primary is not None:
            images.append(("primaryContainer.image", primary))
        for index, container in enumerate(read(args.props, "containers", default=[])):
            image = read(container, "image", default=None)
            if image is not None:
                images.append((f"containers.{index}.image", image))
        # A Marketplace model package runs only network-isolated (issue 39): without it,
        # CreateModel fails at deploy, after the preview said nothing.
        package = read(args.props, "primaryContainer", "modelPackageName", default=None)
        if (
            package is not None
            and read(args.props, "enableNetworkIsolation", default=None) is not True
        ):
            report_violation(
                f"model package {package} needs enableNetworkIsolation: true (Marketplace "
                "packages run only network-isolated)"
            )
        for where, image in images:
            if not _PINNED.match(image):
                report_violation(
                    f"{where} {image!r} is not pinned by digest; use <repository>@sha256:<digest> "
                    "(`tts-bench image push` writes one)"
                )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Requires SageMaker model images to be pinned by digest (repository@sha256:…).",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate,
)
