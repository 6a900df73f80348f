"""The local cloud: a SageMaker real-time endpoint on this machine (SPEC §11).

What it holds: moto in this process for the control plane (`moto_host`, behind `moto_guard`,
which refuses malformed calls as AWS would), whose state the `control_plane` drives where moto
stands still; the `fleet` of real `python -m tts_server`
instance processes and the digest of the image they stand for (`image_digest`); their
CloudWatch `logs` and `metrics` (moto's datapoints aged as CloudWatch's retention ages them in
`metric_retention`); the deployed scaling policies applied by `autoscaling` (AWS's
rules in `planning.aws_scaling`); the SageMaker runtime's wire layer (`runtime`, with `event_stream` frames
and `wire_errors` shapes), the bidirectional stream (`bidi_bridge`, its frames in
`bidi_frames`) and the loopback TLS it is served over (`tls`); the Service Quotas answer
(`quotas`); `deploy`, which creates what the Pulumi program records for a stack; the
`scaling_history` the autoscaler writes and DescribeAlarmHistory / DescribeScalingActivities
read; curve instances (`curve_model`, `curve_instance`, `curve_fleet`), which serve at a
ladder's measured curve instead of synthesising; `settings` and `errors`; `private_files`
(where the TLS key, the CA bundle and the env file may live), `orphans` (the record of a run's
instance processes, which the next start stops if the run was killed) and `signals` (stop
signals held while a piece starts or stops); and `cloud`, which starts, deploys and stops all of it.
Backends hold state and the methods that change it; the wire layer only translates (STYLE 11).
It is test infrastructure of moto's kind: nothing measured through it ever gates a real
deployment.

May import: `artifacts`, `planning`, `aws`, `infra`, `serving` (the launcher of its instance
processes) and the leaves (`errors`, `telemetry`, `engine_modes`, `deployment`, `strict`);
never `measure` (the emulator does not depend on what measures it), `jobs` or `cli`, never the
container package (`tts_server` runs in child processes only).

    with local_cloud(LocalCloudSettings(stack="dev", server_args=("--backend", "onnx"))) as cloud:
        os.environ.update(cloud.env)   # boto3's sagemaker-runtime now reaches it
"""

from tts_bench.local_cloud.cloud import LocalCloud, local_cloud
from tts_bench.local_cloud.errors import DeployError, LocalCloudError, NoInstanceError
from tts_bench.local_cloud.settings import LocalCloudSettings

__all__ = [
    "DeployError",
    "LocalCloud",
    "LocalCloudError",
    "LocalCloudSettings",
    "NoInstanceError",
    "local_cloud",
]
