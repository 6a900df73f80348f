"""Service Quotas' answer (pure)."""

from __future__ import annotations

from tts_bench.local_cloud import quotas

TYPES = {"ml.g5.xlarge": 20}


def test_get_by_code_and_list() -> None:
    code = quotas.quota_code("ml.g5.xlarge")
    status, body = quotas.answer(
        "ServiceQuotasV20190624.GetServiceQuota",
        {"ServiceCode": "sagemaker", "QuotaCode": code},
        TYPES,
    )
    assert status == 200
    assert body["Quota"]["QuotaName"] == "ml.g5.xlarge for endpoint usage"
    assert body["Quota"]["Value"] == 20.0
    status, listed = quotas.answer(
        "ServiceQuotasV20190624.ListServiceQuotas", {"ServiceCode": "sagemaker"}, TYPES
    )
    assert status == 200 and listed["Quotas"] == [body["Quota"]]


def test_unknown_code_or_service_is_no_such_resource() -> None:
    for request in ({"ServiceCode": "sagemaker", "QuotaCode": "L-0"}, {"ServiceCode": "ec2"}):
        status, body = quotas.answer("ServiceQuotasV20190624.GetServiceQuota", request, TYPES)
        assert status == 400 and body["__type"] == "NoSuchResourceException"
