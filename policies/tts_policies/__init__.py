"""The speech endpoint's CrossGuard rules, importable without starting a policy pack."""

from tts_policies import buckets, iam, images, scaling_plan

POLICIES = [
    scaling_plan.POLICY,
    images.POLICY,
    buckets.ENCRYPTION_POLICY,
    buckets.PUBLIC_ACCESS_POLICY,
    iam.NO_WILDCARD_ACTIONS,
    iam.RESOURCE_STAR_ONLY_UNSCOPABLE,
]

__all__ = ["POLICIES"]
