"""Free instance quota before forcing one more instance (T_total, SPEC §4 step 4).

Service Quotas names SageMaker's per-type limit `<instance type> for endpoint usage`; the
instances running are the current counts of every endpoint variant of that type in the region.
`QuotaCheck` is the pure rule; `read_quota_check` the edge that asks both services.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tts_bench.aws.session import AwsSession
from tts_bench.errors import RefusalError

SERVICE_CODE: Final = "sagemaker"


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


@dataclass(frozen=True, slots=True)
class QuotaCheck:
    instance_type: str
    quota: int
    running: int
    region: str

    @property
    def free(self) -> int:
        return self.quota - self.running

    def describe(self) -> str:
        return (
            f"{quota_name(self.instance_type)} in {self.region}: quota {self.quota}, "
            f"{self.running} running, {max(self.free, 0)} free"
        )

    def require(self, needed: int = 1) -> None:
        """Refuse, with the numbers, when fewer than `needed` instances are free."""
        if self.free < needed:
            raise RefusalError(
                f"no free instance quota: {self.describe()}, {needed} needed; ask for a quota "
                "increase (Service Quotas) or stop another endpoint of this type"
            )


def read_quota(session: AwsSession, instance_type: str) -> int:
    name = quota_name(instance_type)
    quotas = session.paginate(
        "service-quotas",
        "list_service_quotas",
        "Quotas",
        resource=f"SageMaker quotas in {session.region}",
        ServiceCode=SERVICE_CODE,
    )
    for quota in quotas:
        if quota.get("QuotaName") == name:
            return int(quota["Value"])
    raise RefusalError(
        f"Service Quotas lists no {name!r} quota in {session.region}; the instance type cannot "
        "be used for endpoints there"
    )


def running_instances(session: AwsSession, instance_type: str) -> int:
    """Current instances of `instance_type` across every endpoint of the region."""
    running = 0
    endpoints = session.paginate(
        "sagemaker", "list_endpoints", "Endpoints", resource=f"endpoints in {session.region}"
    )
    for summary in endpoints:
        name = summary["EndpointName"]
        described = session.call(
            "sagemaker", "describe_endpoint", resource=f"endpoint {name}", EndpointName=name
        )
        config_name = described.get("EndpointConfigName")
        if not config_name:
            continue
        config = session.call(
            "sagemaker",
            "describe_endpoint_config",
            resource=f"endpoint config {config_name}",
            EndpointConfigName=config_name,
        )
        types = {v["VariantName"]: v.get("InstanceType") for v in config["ProductionVariants"]}
        for variant in described.get("ProductionVariants", []):
            if types.get(variant["VariantName"]) == instance_type:
                running += int(variant.get("CurrentInstanceCount") or 0)
    return running


def read_quota_check(session: AwsSession, instance_type: str) -> QuotaCheck:
    return QuotaCheck(
        instance_type=instance_type,
        quota=read_quota(session, instance_type),
        running=running_instances(session, instance_type),
        region=session.region,
    )
