"""The local cloud: a SageMaker real-time endpoint on this machine (SPEC §11).

What it holds: moto in this process for the control plane (`moto_host`), whose state the
`control_plane` drives where moto stands still; the `fleet` of real `python -m tts_server`
instance processes; their CloudWatch `logs` and `metrics`; the deployed scaling policies
applied by `autoscaling` (AWS's rules in `planning.aws_scaling`); the SageMaker runtime's wire layer
(`runtime`, with `event_stream` frames and `wire_errors` shapes) and the Service Quotas answer
(`quotas`); `deploy`, which creates what the Pulumi program records for a stack; and `cloud`,
which starts, deploys and stops all of it. Backends hold state and the methods that change it;
the wire layer only translates (STYLE 11). It is test infrastructure of moto's kind: nothing
measured through it ever gates a real deployment.

May import: `artifacts`, `planning`, `measure`, `aws`, `infra` and the leaves (`errors`,
`telemetry`, `engine_modes`, `deployment`); never `jobs` or `cli`, never the container package
(`tts_server` runs in child processes only).

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
