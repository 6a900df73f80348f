"""CloudWatch and scaling: what the instances report, and the policy that acts on it.

What it holds: the variant's CloudWatch `metrics` (moto's datapoints aged as CloudWatch's
retention ages them in `metric_retention`) and `logs`; the deployed scaling policies and
scheduled actions applied by `autoscaling` (AWS's rules in `planning.aws.scaling` and
`planning.aws.scheduled`); and the `scaling_history` the autoscaler
writes and DescribeAlarmHistory / DescribeScalingActivities read.

May import: the shared modules at the top of `local_cloud` (never `cloud`) and what
`local_cloud` may import; no other plane.
"""
