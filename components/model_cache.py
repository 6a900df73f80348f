"""ModelCache: a build that copies the model's Hugging Face files, at a pinned revision, into
the weights bucket, so that cold starts read S3 and never the internet."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

BUILDSPEC = """\
version: 0.2
phases:
  install:
    commands:
      - pip install --quiet "huggingface_hub>=0.24,<1"
  build:
    commands:
      - huggingface-cli download "$HF_REPO" --revision "$HF_REVISION" --local-dir /tmp/model
      - rm -rf /tmp/model/.cache
      - aws s3 sync /tmp/model "$TARGET_URI" --no-progress
"""


@dataclass(frozen=True)
class ModelCacheArgs:
    project_name: (
        str  # literal: one project per revision, started once (`aws codebuild start-build`)
    )
    bucket_name: str
    models_prefix: str
    model: str
    hf_repo: str
    revision: str
    build_role_arn: pulumi.Input[str]
    tags: dict[str, str]


def model_data_uri(bucket: str, models_prefix: str, model: str, revision: str) -> str:
    """Where one revision of the weights lives: the S3 prefix SageMaker mounts at /opt/ml/model."""
    return f"s3://{bucket}/{models_prefix}{model}/{revision}/"


class ModelCache(pulumi.ComponentResource):
    """The CodeBuild project that syncs one pinned revision into the bucket; `model_data_uri`
    is the prefix the endpoint loads."""

    def __init__(self, name: str, args: ModelCacheArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("speech:aws:ModelCache", name, None, opts)
        self.model_data_uri = model_data_uri(
            args.bucket_name, args.models_prefix, args.model, args.revision
        )
        env = {
            "HF_REPO": args.hf_repo,
            "HF_REVISION": args.revision,
            "TARGET_URI": self.model_data_uri,
        }
        self.project = aws.codebuild.Project(
            f"{name}-sync",
            name=args.project_name,
            description=f"Copy {args.hf_repo}@{args.revision} into {self.model_data_uri}",
            service_role=args.build_role_arn,
            build_timeout=30,
            source=aws.codebuild.ProjectSourceArgs(type="NO_SOURCE", buildspec=BUILDSPEC),
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                compute_type="BUILD_GENERAL1_SMALL",
                image="aws/codebuild/standard:7.0",
                type="LINUX_CONTAINER",
                environment_variables=[
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name=k, value=v)
                    for k, v in env.items()
                ],
            ),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.project_name: pulumi.Output[str] = self.project.name
        self.register_outputs(
            {"project_name": self.project_name, "model_data_uri": self.model_data_uri}
        )
