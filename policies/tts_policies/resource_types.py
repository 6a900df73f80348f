"""Pulumi type tokens of the AWS resources the rules look at."""

from typing import Final

SAGEMAKER_MODEL: Final = "aws:sagemaker/model:Model"
SAGEMAKER_ENDPOINT_CONFIG: Final = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
SAGEMAKER_ENDPOINT: Final = "aws:sagemaker/endpoint:Endpoint"
SCALABLE_TARGET: Final = "aws:appautoscaling/target:Target"
SCALING_POLICY: Final = "aws:appautoscaling/policy:Policy"
SCHEDULED_ACTION: Final = "aws:appautoscaling/scheduledAction:ScheduledAction"
METRIC_ALARM: Final = "aws:cloudwatch/metricAlarm:MetricAlarm"
S3_BUCKET: Final = "aws:s3/bucket:Bucket"
S3_ENCRYPTION: Final = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
)
S3_PUBLIC_ACCESS_BLOCK: Final = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
IAM_ROLE: Final = "aws:iam/role:Role"
IAM_ROLE_POLICY: Final = "aws:iam/rolePolicy:RolePolicy"
IAM_POLICY: Final = "aws:iam/policy:Policy"
IAM_USER_POLICY: Final = "aws:iam/userPolicy:UserPolicy"
IAM_GROUP_POLICY: Final = "aws:iam/groupPolicy:GroupPolicy"
