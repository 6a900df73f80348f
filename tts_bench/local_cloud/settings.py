"""What a local cloud is started with (the contract the bidi and chain engineers build on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tts_bench.aws.clock import CLOUDWATCH_DELAY_S
from tts_bench.local_cloud.instances.curve_model import ServiceLaw
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics

REPO_ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"  # moto's default account, and the stack's placeholder one
REGION = "us-east-1"
# SageMaker ends every invocation at 60 s; tests lower it to reach the error quickly.
INVOCATION_CEILING_S = 60.0
# The most instances one local cloud runs, whatever the stack, quota or API asks: a process
# instance is a real server on this machine; a curve instance is a small object in this process
# (a fleet of the reference plan's 280 fits). The emulated quota (and every count) stays under it.
MAX_LOCAL_INSTANCES = 64
MAX_CURVE_INSTANCES = 1000
# The longest emulated provisioning delay (--provision-delay-s) an instance waits.
MAX_PROVISION_DELAY_S = 3600.0


@dataclass(frozen=True)
class CurveInstances:
    """Curve instances instead of processes (SPEC §13): the ladder `qmax` gives the service
    curve and the fingerprint, `ttotal` the start-up (default: the one `plan` names), `plan` the
    scaling to deploy (none: the endpoint deploys without scaling)."""

    qmax: Path
    ttotal: Path | None = None
    plan: Path | None = None
    rate_scale: float = 1.0
    service: ServiceLaw = "exponential"
    seed: int | None = None  # the instances' random streams (None: fresh entropy)


@dataclass(frozen=True)
class LocalCloudSettings:
    stack: str = "dev"  # stack config to deploy from (tts-bench preview records it)
    instances: int | None = None  # initial instance count (overrides the stack's when set)
    provision_delay_s: float = 0.0  # stand-in for EC2 provisioning + image pull (emulated)
    program_dir: Path = REPO_ROOT
    server_args: tuple[str, ...] = ()  # extra `python -m tts_server` flags (tests: --backend onnx)
    stack_overrides: dict[str, object] = field(default_factory=dict)  # config values tests change
    # Beyond the contract, each with SageMaker's own value by default:
    invocation_ceiling_s: float = INVOCATION_CEILING_S
    # Cooldowns and alarm periods of the deployed policies are multiplied by this (tests: 0.1);
    # the metric period stays 10 s. 1.0 = the policies exactly as deployed.
    scaling_time_scale: float = 1.0
    # The Service Quotas answer for `ml.<type> for endpoint usage` (None: the stack's maxInstances).
    instance_quota: int | None = None
    # Container env added on top of the deployed Model's (tests: a small MAX_QUEUE_DEPTH).
    instance_env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None  # each instance's stdout is also kept here when set
    curve: CurveInstances | None = None  # None: real `python -m tts_server` processes
    # Any container keeping SageMaker's contract, started per instance instead of tts_server
    # (`instances.container_command`); None: `python -m tts_server`.
    container_cmd: str | None = None
    # The cloud's clocks (metric periods, alarms, cooldowns, start-up) run this many times faster
    # than the wall clock; its timestamps are virtual (`tts_bench.aws.clock`). Curve instances only.
    time_scale: float = 1.0
    cloudwatch_delay_s: float = CLOUDWATCH_DELAY_S  # in the cloud's own (virtual) seconds
    # How AWS behaves where its documentation leaves it open (docs/aws-semantics.md).
    aws_semantics: AwsSemantics = DOCUMENTED


def instance_cap(settings: LocalCloudSettings) -> int:
    """The most instances this cloud's instance model runs (see MAX_LOCAL_INSTANCES)."""
    return MAX_CURVE_INSTANCES if settings.curve is not None else MAX_LOCAL_INSTANCES
