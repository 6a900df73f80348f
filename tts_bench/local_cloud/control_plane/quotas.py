"""Service Quotas' answer for SageMaker instance quotas (moto has none for SageMaker).

The runtime serves `GetServiceQuota`, `ListServiceQuotas` and `ListAWSDefaultServiceQuotas`
for service code `sagemaker`, reached through `AWS_ENDPOINT_URL_SERVICE_QUOTAS`. One quota per
deployed instance type, named as AWS names it (`ml.g5.xlarge for endpoint usage`), its value
the local cloud's setting (default: the stack's maxInstances). Pure.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tts_bench.local_cloud.settings import REGION

SERVICE_CODE = "sagemaker"
TARGET_PREFIX = "ServiceQuotasV20190624."


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


def quota_code(instance_type: str) -> str:
    """A stable `L-XXXXXXXX` code per instance type (AWS's codes are opaque too)."""
    return "L-" + hashlib.sha256(quota_name(instance_type).encode()).hexdigest()[:8].upper()


def quota(instance_type: str, value: int, account: str) -> dict[str, Any]:
    code = quota_code(instance_type)
    return {
        "ServiceCode": SERVICE_CODE,
        "ServiceName": "Amazon SageMaker",
        "QuotaArn": f"arn:aws:servicequotas:{REGION}:{account}:{SERVICE_CODE}/{code}",
        "QuotaCode": code,
        "QuotaName": quota_name(instance_type),
        "Value": float(value),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def answer(
    target: str, request: dict[str, Any], quotas: dict[str, int], account: str
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) for one Service Quotas call; `quotas` maps type → value."""
    operation = target.removeprefix(TARGET_PREFIX)
    known = [quota(t, v, account) for t, v in sorted(quotas.items())]
    if request.get("ServiceCode") != SERVICE_CODE:
        return 400, {
            "__type": "NoSuchResourceException",
            "message": f"the local cloud answers Service Quotas for {SERVICE_CODE!r} only",
        }
    if operation == "GetServiceQuota" or operation == "GetAWSDefaultServiceQuota":
        for q in known:
            if q["QuotaCode"] == request.get("QuotaCode"):
                return 200, {"Quota": q}
        return 400, {
            "__type": "NoSuchResourceException",
            "message": f"no quota {request.get('QuotaCode')!r} for {SERVICE_CODE}",
        }
    if operation in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas"):
        code = request.get("QuotaCode")
        return 200, {"Quotas": [q for q in known if code in (None, q["QuotaCode"])]}
    return 400, {
        "__type": "InvalidParameterValueException",
        "message": f"the local cloud does not serve Service Quotas operation {operation!r}",
    }
