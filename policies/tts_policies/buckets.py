"""Every S3 bucket is encrypted and blocks public access.

In pulumi-aws 7 both settings are resources of their own that point at the bucket, so these
are stack rules: a bucket passes when a companion resource depends on it (or names it
literally) and that companion's settings are right.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from tts_policies.preview_values import read, unknowns_reported
from tts_policies.resource_types import S3_BUCKET, S3_ENCRYPTION, S3_PUBLIC_ACCESS_BLOCK

ENCRYPTION_ALGORITHMS = frozenset({"AES256", "aws:kms", "aws:kms:dsse"})
PUBLIC_ACCESS_FLAGS = (
    "blockPublicAcls",
    "blockPublicPolicy",
    "ignorePublicAcls",
    "restrictPublicBuckets",
)


def _encryption_problem(props: Mapping[str, Any]) -> str | None:
    rules = read(props, "rules", default=[]) or read(props, "rule", default=[])
    algorithms = [
        read(r, "applyServerSideEncryptionByDefault", "sseAlgorithm", default=None) for r in rules
    ]
    if not any(a in ENCRYPTION_ALGORITHMS for a in algorithms):
        return f"its encryption configuration sets no default algorithm of {sorted(ENCRYPTION_ALGORITHMS)}"
    return None


def _public_access_problem(props: Mapping[str, Any]) -> str | None:
    off = [flag for flag in PUBLIC_ACCESS_FLAGS if read(props, flag, default=False) is not True]
    return f"its public access block leaves {', '.join(off)} off" if off else None


def _companions(
    bucket: PolicyResource, resources: list[PolicyResource], type_: str
) -> list[PolicyResource]:
    name = read(bucket.props, "bucket", default=None)
    found = []
    for resource in resources:
        if resource.resource_type != type_:
            continue
        if bucket in resource.property_dependencies.get("bucket", []) or (
            name is not None and read(resource.props, "bucket", default=None) == name
        ):
            found.append(resource)
    return found


def companion_policy(
    name: str, description: str, companion: str, problem: Callable[[Mapping[str, Any]], str | None]
) -> StackValidationPolicy:
    """A rule: every bucket has a `companion` resource for which `problem` finds nothing."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for bucket in (r for r in args.resources if r.resource_type == S3_BUCKET):
            with unknowns_reported(report_violation, f"bucket {bucket.name}", bucket.urn):
                found = _companions(bucket, args.resources, companion)
                if not found:
                    kind = companion.rsplit(":", 1)[-1]
                    report_violation(f"bucket {bucket.name} has no {kind}", bucket.urn)
                for resource in found:
                    with unknowns_reported(report_violation, f"{resource.name}", resource.urn):
                        issue = problem(resource.props)
                        if issue:
                            report_violation(f"bucket {bucket.name}: {issue}", resource.urn)

    return StackValidationPolicy(
        name=name,
        description=description,
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate,
    )


ENCRYPTION_POLICY = companion_policy(
    "s3-bucket-encrypted",
    "Requires every S3 bucket to have default server-side encryption.",
    S3_ENCRYPTION,
    _encryption_problem,
)
PUBLIC_ACCESS_POLICY = companion_policy(
    "s3-bucket-public-access-blocked",
    "Requires every S3 bucket to block all four kinds of public access.",
    S3_PUBLIC_ACCESS_BLOCK,
    _public_access_problem,
)
