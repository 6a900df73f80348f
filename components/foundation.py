"""Foundation: the roles, the weights bucket and the image repository everything else uses."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from tts_bench.infra.iam_documents import (
    AccountScope,
    assume_role_document,
    build_role_document,
    execution_role_document,
    package_execution_role_document,
)


@dataclass(frozen=True)
class FoundationArgs:
    """Literal names, so that ARNs in the IAM documents are known at preview."""

    scope: AccountScope
    endpoint_name: str
    bucket_name: str
    models_prefix: str  # "models/", the part of the bucket the roles may touch
    repository_name: str
    repository_arn: str
    build_project_name: str
    tags: dict[str, str]


class Foundation(pulumi.ComponentResource):
    """SageMaker execution role and build role (least privilege), the encrypted, versioned,
    private weights bucket and the scan-on-push, immutable-tag ECR repository; the bucket and
    the repository are retained when the stack is destroyed."""

    def __init__(self, name: str, args: FoundationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("speech:aws:Foundation", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        retained = pulumi.ResourceOptions(parent=self, retain_on_delete=True)

        self.bucket = aws.s3.Bucket(
            f"{name}-weights", bucket=args.bucket_name, tags=args.tags, opts=retained
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-weights-encryption",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms"
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-weights-public-access",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketVersioning(
            f"{name}-weights-versioning",
            bucket=self.bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"
            ),
            opts=child,
        )
        self.repository = aws.ecr.Repository(
            f"{name}-repository",
            name=args.repository_name,
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                scan_on_push=True
            ),
            tags=args.tags,
            opts=retained,
        )

        self.execution_role = aws.iam.Role(
            f"{name}-execution-role",
            assume_role_policy=assume_role_document("sagemaker.amazonaws.com"),
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-execution-policy",
            role=self.execution_role.id,
            policy=execution_role_document(
                args.scope,
                args.bucket_name,
                args.models_prefix,
                args.repository_arn,
                args.endpoint_name,
            ),
            opts=child,
        )
        self.build_role = aws.iam.Role(
            f"{name}-build-role",
            assume_role_policy=assume_role_document("codebuild.amazonaws.com"),
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-build-policy",
            role=self.build_role.id,
            policy=build_role_document(
                args.scope, args.bucket_name, args.models_prefix, args.build_project_name
            ),
            opts=child,
        )

        self.bucket_name: pulumi.Output[str] = self.bucket.bucket
        self.repository_url: pulumi.Output[str] = self.repository.repository_url
        self.execution_role_arn: pulumi.Output[str] = self.execution_role.arn
        self.build_role_arn: pulumi.Output[str] = self.build_role.arn
        self.register_outputs(
            {
                "bucket_name": self.bucket_name,
                "repository_url": self.repository_url,
                "execution_role_arn": self.execution_role_arn,
                "build_role_arn": self.build_role_arn,
            }
        )


class PackageRole(pulumi.ComponentResource):
    """The execution role of a stack that deploys a vendor's model package: logs only. Such a
    stack has no weights bucket, no repository and no build (the package brings its own)."""

    def __init__(
        self,
        name: str,
        scope: AccountScope,
        endpoint_name: str,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("speech:aws:PackageRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.execution_role = aws.iam.Role(
            f"{name}-execution-role",
            assume_role_policy=assume_role_document("sagemaker.amazonaws.com"),
            tags=tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-execution-policy",
            role=self.execution_role.id,
            policy=package_execution_role_document(scope, endpoint_name),
            opts=child,
        )
        self.execution_role_arn: pulumi.Output[str] = self.execution_role.arn
        self.register_outputs({"execution_role_arn": self.execution_role_arn})
