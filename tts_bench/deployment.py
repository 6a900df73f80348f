"""The deployed shape of a plan: names, metric settings, tags and operator bounds.

The Pulumi components create these resources, `drift` and `validate` read them back, and the
policy pack checks them; all three take the names and settings from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

DEFAULT_VARIANT: Final = "AllTraffic"
SCALABLE_DIMENSION: Final = "sagemaker:variant:DesiredInstanceCount"
SERVICE_NAMESPACE: Final = "sagemaker"

# Target tracking on the high-resolution concurrency metric, scale-in disabled. SageMaker
# publishes it every 10 s; the alarms Application Auto Scaling creates for the policy evaluate
# its 10 s Maximum (README "CloudWatch units" gives the sources; `validate` reads the deployed
# alarms back and checks it). The target value is in these units.
TARGET_TRACKING_METRIC: Final = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
# The fleet rule's target tracking: the standard, load-linear invocations metric (1 min Sum).
INVOCATIONS_TRACKING_METRIC: Final = "SageMakerVariantInvocationsPerInstance"
TARGET_TRACKING_STATISTIC: Final = "Maximum"
TARGET_TRACKING_PERIOD_S: Final = 10
# How long the policy can take to notice a breach: metric period × evaluation periods + the
# scale-out cooldown (10 s × 3 + 30 s), added to the measured T_total as its own term.
TARGET_TRACKING_EVALUATION_PERIODS: Final = 3
DEFAULT_POLICY_LAG_BOUND_S: Final = 60.0

# The variant routing a built-in endpoint contract's vendor recommends (Sonic-3's page asks for
# least-outstanding-requests beside its 429s); a stack names its contract, so the program reads
# it here, and the contract (`measure.transport.contract`) takes its `routing` from here too.
CONTRACT_ROUTING: Final[dict[str, str]] = {"sonic3": "LEAST_OUTSTANDING_REQUESTS"}


def recommended_routing(contract: str) -> str | None:
    """The routing the built-in contract named `contract` recommends; None for any other."""
    return CONTRACT_ROUTING.get(contract)


# Scale-in: a step policy removing one instance on our own alarm. It evaluates the statistic
# and period its threshold's ratio was measured for: the ladder reads CloudWatch's 10 s
# Maximum, so this is a high-resolution alarm (period < 60 s; priced above a standard one).
SCALE_IN_STATISTIC: Final = "Maximum"
SCALE_IN_PERIOD_S: Final = 10
SCALE_IN_EVALUATION_PERIODS: Final = 3
SCALE_IN_COMPARISON: Final = "LessThanOrEqualToThreshold"
SCALE_IN_ADJUSTMENT: Final = -1

# Tags the program sets so that policies can check literals at preview.
TAG_PLAN_ID: Final = "tts-bench:plan-id"
# The rule of the plan the stack deploys (its config's planRule), so the pack picks that plan.
TAG_PLAN_RULE: Final = "tts-bench:plan-rule"
TAG_IMAGE_DIGEST: Final = "tts-bench:image-digest"
# In its place on a stack that deploys a vendor's model package: the versioned package ARN.
TAG_MODEL_PACKAGE: Final = "tts-bench:model-package"
# The model id the plan was measured for, on the SageMaker Model, so a policy can match plans.
TAG_MODEL: Final = "tts-bench:model"
# The endpoint contract the stack's container speaks, when not kokoro (a Kokoro stack's Model
# carries no such tag, so its preview is as it was), so the pack keys plans on it too.
TAG_CONTRACT: Final = "tts-bench:contract"
TAG_MIN_BOUND: Final = "tts-bench:operator-min-instances"
TAG_MAX_BOUND: Final = "tts-bench:operator-max-instances"


# The local cloud's Model image: the working tree's local digest under a repository no registry
# has, so a stack (whose image is always an ECR reference) can never be mistaken for it.
LOCAL_IMAGE_REPOSITORY: Final = "local/tts-server"
_LOCAL_IMAGE = re.compile(rf"^{re.escape(LOCAL_IMAGE_REPOSITORY)}@sha256:[0-9a-f]{{64}}$")


def local_image_reference(digest: str) -> str:
    """`local/tts-server@sha256:<hex>`: the image the local cloud deploys for a local digest."""
    return f"{LOCAL_IMAGE_REPOSITORY}@{digest}"


def is_local_image(reference: str) -> bool:
    """Whether `reference` is a local digest (the local cloud's image), not a registry image."""
    return bool(_LOCAL_IMAGE.match(reference.strip()))


# The local cloud's model packages: it stands in for the seller of a package stack's ARN, in
# the all-zero account, a placeholder naming no seller, so an emulated plan measured on such a
# package is never matched to a seller's (as a local digest is in no registry).
LOCAL_PACKAGE_ACCOUNT: Final = "000000000000"
_PACKAGE_ACCOUNT = re.compile(
    r"^(arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:)(\d{12})(:model-package/.+)$"
)


def local_package_arn(arn: str) -> str:
    """The package `arn` names, held by the local cloud: the same region, name and version, in
    `LOCAL_PACKAGE_ACCOUNT` (`arn` unchanged when it is no model package ARN)."""
    return _PACKAGE_ACCOUNT.sub(rf"\g<1>{LOCAL_PACKAGE_ACCOUNT}\g<3>", arn.strip())


def is_local_package(arn: str) -> bool:
    """Whether `arn` is a model package the local cloud holds, not a seller's."""
    match = _PACKAGE_ACCOUNT.match(arn.strip())
    return match is not None and match.group(2) == LOCAL_PACKAGE_ACCOUNT


def resource_id(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return f"endpoint/{endpoint}/variant/{variant}"


def parse_resource_id(value: str) -> tuple[str, str] | None:
    """(endpoint, variant) of an Application Auto Scaling resource id, or None if not SageMaker's."""
    match = re.fullmatch(r"endpoint/([^/]+)/variant/([^/]+)", value)
    return (match.group(1), match.group(2)) if match else None


# A plan's scaling policies by role (`DeployShape.policies[].role`), and the alarms of its step
# policies; target tracking's alarms are named by Application Auto Scaling.
POLICY_ROLES: Final = ("concurrency-target", "invocations-target", "scale-in", "burst")
_STEP_ALARMS: Final = {"scale-in": "low-concurrency", "burst": "burst-concurrency"}


def policy_name(endpoint: str, variant: str, role: str) -> str:
    return f"{endpoint}-{variant}-{role}"


def step_alarm_name(endpoint: str, variant: str, role: str) -> str:
    return f"{endpoint}-{variant}-{_STEP_ALARMS[role]}"


def metric_queries_from_pulumi(queries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A MetricAlarm's `metricQueries` as Pulumi holds them (camelCase, dimensions a map) in
    PutMetricAlarm's `Metrics` spelling, which `planning.aws.metric_math` builds and parses."""
    metrics = []
    for q in queries:
        query: dict[str, Any] = {"Id": q.get("id")}
        names = (("expression", "Expression"), ("label", "Label"), ("returnData", "ReturnData"))
        # Unset ReturnData is CloudWatch's default (true): left unset here too.
        query |= {api: q[key] for key, api in names if q.get(key) is not None}
        if (metric := q.get("metric")) is not None:
            dimensions = metric.get("dimensions") or {}
            query["MetricStat"] = {
                "Metric": {
                    "Namespace": metric.get("namespace"),
                    "MetricName": metric.get("metricName"),
                    "Dimensions": [{"Name": k, "Value": v} for k, v in sorted(dimensions.items())],
                },
                "Period": metric.get("period"),
                "Stat": metric.get("stat"),
            }
        metrics.append(query)
    return metrics


def scheduled_action_name(endpoint: str, variant: str, at_utc: str) -> str:
    """A plan's scheduled action by its time (`HH:MM`, a weekly one's `Sat 07:30`): one per
    minute of its period, so unique."""
    return f"{endpoint}-{variant}-schedule-{at_utc.replace(':', '').replace(' ', '-').lower()}"


def target_tracking_policy_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return policy_name(endpoint, variant, "concurrency-target")


def scale_in_policy_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return policy_name(endpoint, variant, "scale-in")


def scale_in_alarm_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return step_alarm_name(endpoint, variant, "scale-in")


def first_chunk_alarm_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return f"{endpoint}-{variant}-FirstChunkLatencyP95"


def queue_saturation_alarm_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return f"{endpoint}-{variant}-queue-saturated"


def server_errors_alarm_name(endpoint: str, variant: str = DEFAULT_VARIANT) -> str:
    return f"{endpoint}-{variant}-5xx"


def dashboard_name(endpoint: str) -> str:
    return f"{endpoint}-speech"


class OperatorBounds(BaseModel):
    """The operator's instance bounds for a stack (quota and budget), inclusive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_instances: PositiveInt
    max_instances: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> OperatorBounds:
        if self.max_instances < self.min_instances:
            raise ValueError(
                f"max_instances ({self.max_instances}) is below min_instances ({self.min_instances})"
            )
        return self

    @property
    def scaling_enabled(self) -> bool:
        return self.max_instances > self.min_instances

    @classmethod
    def parse(cls, text: str) -> OperatorBounds:
        """`MIN:MAX`, as the `--bounds` flag takes it."""
        match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
        if not match:
            raise ValueError(f"bounds must look like MIN:MAX (e.g. 1:20), got {text!r}")
        return cls(min_instances=int(match.group(1)), max_instances=int(match.group(2)))

    def clamp(self, plan_min: int, plan_max: int) -> tuple[int, int]:
        """The plan's min/max clamped into these bounds: what is deployed."""
        low = min(max(plan_min, self.min_instances), self.max_instances)
        high = min(max(plan_max, low), self.max_instances)
        return low, high

    def peak_unreachable(self, plan_max: int) -> bool:
        return plan_max > self.max_instances
