"""What a local cloud is started with (the contract the bidi and chain engineers build on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# SageMaker ends every invocation at 60 s; tests lower it to reach the error quickly.
INVOCATION_CEILING_S = 60.0
# The most instance processes one local cloud runs, whatever the stack, quota or API asks: each
# is a real server on this machine. The emulated quota (and so every count) never exceeds it.
MAX_LOCAL_INSTANCES = 64
# The longest emulated provisioning delay (--provision-delay-s) an instance waits.
MAX_PROVISION_DELAY_S = 3600.0


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
