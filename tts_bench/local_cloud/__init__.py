"""The local cloud: a SageMaker real-time endpoint on this machine (SPEC §11).

By plane, as AWS splits it:
- `control_plane`: moto and its guard, the endpoint's state where moto stands still, deploys
  and the Service Quotas answer;
- `data_plane`: the SageMaker runtime's wire layer, its event-stream frames and wire errors,
  the bidirectional stream's HTTP/2 bridge and the loopback TLS it is served over;
- `instances`: the fleet of real `python -m tts_server` instance processes (or of any
  container command, `--container-cmd`), curve instances
  and their model, and the digest of the image they stand for;
- `cloudwatch`: metrics and logs, the deployed scaling policies applied by AWS's rules, and the
  scaling history the autoscaler writes.

At the top: `cloud`, which starts, deploys and stops all of it; `settings` (what a local cloud
is started with, and the account and region it answers as) and `errors`; `private_files`
(where the TLS key, the CA bundle and the env file may live), `orphans` (the record of a run's
instance processes, which the next start stops if the run was killed), `signals` (stop
signals held while a piece starts or stops) and `modelled_time` (the instant an act of the
cloud's is modelled at, which its own requests to moto carry, so a late thread does not move
what moto stamps).
Backends hold state and the methods that change it; the wire layer only translates (STYLE 11).
It is test infrastructure of moto's kind: nothing measured through it ever gates a real
deployment.

May import: `artifacts`, `planning`, `aws`, `infra`, `serving` (the launcher of its instance
processes) and the leaves (`errors`, `telemetry`, `engine_modes`, `deployment`, `strict`);
never `measure` (the emulator does not depend on what measures it), `jobs` or `cli`, never the
container package (`tts_server` runs in child processes only). Inside, each plane imports the
shared modules at the top (never `cloud`) and the planes below it, in this order: `cloudwatch`,
`instances` (and `control_plane.deploy`: a curve fleet marks the deployment it serves),
`control_plane`, `data_plane`; the shared modules import only `instances.curve_model` (the
service law a setting names); `cloud` imports everything (tests/core/test_layering.py holds it).

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
