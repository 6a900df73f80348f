"""Service Quotas' answer (pure)."""

from __future__ import annotations

from tts_bench.local_cloud.control_plane import quotas

TYPES = {"ml.g5.xlarge": 20}
ACCOUNT_B = "123456789013"  # a second cloud's account in the same process


def test_get_by_code_and_list() -> None:
    code = quotas.quota_code("ml.g5.xlarge")
    status, body = quotas.answer(
        "ServiceQuotasV20190624.GetServiceQuota",
        {"ServiceCode": "sagemaker", "QuotaCode": code},
        TYPES,
        ACCOUNT_B,
    )
    assert status == 200
    assert body["Quota"]["QuotaArn"].split(":")[4] == ACCOUNT_B  # the cloud's own account
    assert body["Quota"]["QuotaName"] == "ml.g5.xlarge for endpoint usage"
    assert body["Quota"]["Value"] == 20.0
    status, listed = quotas.answer(
        "ServiceQuotasV20190624.ListServiceQuotas", {"ServiceCode": "sagemaker"}, TYPES, ACCOUNT_B
    )
    assert status == 200 and listed["Quotas"] == [body["Quota"]]


def test_unknown_code_or_service_is_no_such_resource() -> None:
    for request in ({"ServiceCode": "sagemaker", "QuotaCode": "L-0"}, {"ServiceCode": "ec2"}):
        status, body = quotas.answer(
            "ServiceQuotasV20190624.GetServiceQuota", request, TYPES, ACCOUNT_B
        )
        assert status == 400 and body["__type"] == "NoSuchResourceException"
