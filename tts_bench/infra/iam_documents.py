"""IAM policy documents built from literals, so the policy pack can read them at preview.

Every ARN is spelled from config (account, region, names), never from another resource's
output, which would be unknown until the resource exists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# Actions AWS cannot scope to a resource: the only ones allowed `Resource: "*"`.
UNSCOPABLE_ACTIONS = frozenset({"ecr:GetAuthorizationToken"})


@dataclass(frozen=True)
class AccountScope:
    account: str
    region: str


def assume_role_document(service: str) -> str:
    return _document(
        [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]
    )


def bucket_arn(bucket: str) -> str:
    return f"arn:aws:s3:::{bucket}"


def log_group_arns(scope: AccountScope, group: str) -> list[str]:
    base = f"arn:aws:logs:{scope.region}:{scope.account}:log-group:{group}"
    return [base, f"{base}:*"]


def execution_role_document(
    scope: AccountScope, bucket: str, models_prefix: str, repository_arn: str, endpoint: str
) -> str:
    """What the SageMaker endpoint needs: pull its image, read its weights, write its logs."""
    return _document(
        [
            _allow(["ecr:GetAuthorizationToken"], ["*"]),
            _allow(
                [
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                [repository_arn],
            ),
            _allow(["s3:ListBucket"], [bucket_arn(bucket)]),
            _allow(["s3:GetObject"], [f"{bucket_arn(bucket)}/{models_prefix}*"]),
            _endpoint_logs(scope, endpoint),
        ]
    )


def package_execution_role_document(scope: AccountScope, endpoint: str) -> str:
    """What an endpoint of a vendor's model package needs: write its logs. SageMaker pulls the
    package's images itself, and its artifacts come with the package: no repository, no bucket."""
    return _document([_endpoint_logs(scope, endpoint)])


def build_role_document(scope: AccountScope, bucket: str, models_prefix: str, project: str) -> str:
    """What the model-cache build needs: write the weights, write its logs."""
    return _document(
        [
            _allow(["s3:ListBucket"], [bucket_arn(bucket)]),
            _allow(
                ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
                [f"{bucket_arn(bucket)}/{models_prefix}*"],
            ),
            _allow(
                ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                log_group_arns(scope, f"/aws/codebuild/{project}"),
            ),
        ]
    )


def _endpoint_logs(scope: AccountScope, endpoint: str) -> dict[str, object]:
    return _allow(
        [
            "logs:CreateLogGroup",
            "logs:CreateLogStream",
            "logs:DescribeLogStreams",
            "logs:PutLogEvents",
        ],
        log_group_arns(scope, f"/aws/sagemaker/Endpoints/{endpoint}"),
    )


def _allow(actions: list[str], resources: list[str]) -> dict[str, object]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources}


def _document(statements: list[dict[str, object]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)
