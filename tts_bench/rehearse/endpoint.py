"""The endpoint a rehearsal drives: its build, its deployed scaling and its clock, read back.

Everything here is read before a request is sent, and every reason not to rehearse is one line:
an endpoint that is not InService, of another build than the plan, whose scaling is not the
plan's or not live (`aws.live_scaling`: no plan deployed, frozen, other settings, unsettled),
or whose clock is compressed on AWS (`aws.clock.service_clock`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.aws.clock import ServiceClock, service_clock
from tts_bench.aws.live_scaling import DeployedAlarm, LiveScaling, read_live_scaling
from tts_bench.aws.scaling_record import Watched
from tts_bench.aws.session import AwsSession
from tts_bench.errors import RefusalError
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target
from tts_bench.measure.transport.contract import KOKORO, EndpointContract


@dataclass(frozen=True)
class RehearsalTarget:
    """The endpoint as a rehearsal sees it, read once before it starts."""

    target: EndpointTarget
    clock: ServiceClock
    scaling: LiveScaling
    contract: EndpointContract = KOKORO  # its requests built and read by the plan's contract

    @property
    def alarms(self) -> tuple[DeployedAlarm, ...]:
        return self.scaling.alarms

    @property
    def min_instances(self) -> int:
        return self.scaling.min_instances

    @property
    def max_instances(self) -> int:
        return self.scaling.max_instances

    @property
    def in_service(self) -> int:
        return self.scaling.in_service

    @property
    def rate_scale(self) -> float:
        return self.target.rate_scale

    @property
    def thinning(self) -> float:
        """How many of the modelled fleet's requests one request sent here stands for."""
        return self.target.rate_scale * self.clock.scale

    @property
    def watched(self) -> Watched:
        return Watched(self.target.endpoint, self.target.variant, self.alarms)


def check_build(target: EndpointTarget, plan: PlanArtifact) -> None:
    if plan.fingerprint is not None and (diffs := plan.fingerprint.differences(target.fingerprint)):
        raise RefusalError(
            f"endpoint {target.endpoint} serves another build than plan {plan.plan_id} was made "
            f"for ({'; '.join(diffs)}); use the plan of the build deployed"
        )


def read_rehearsal_target(
    session: AwsSession,
    endpoint: str,
    variant: str,
    plan: PlanArtifact,
    model: str,
    time_scale: float | None,
    contract: EndpointContract = KOKORO,
) -> RehearsalTarget:
    """Read and check the endpoint; refuse, in one line, anything that makes it no rehearsal."""
    target = read_endpoint_target(
        session, endpoint, variant, Transport.RESPONSE_STREAM, model
    ).under_contract(contract.ref)
    if target.curve_modelled and contract.ref is not None:
        raise RefusalError(
            f"endpoint {endpoint} runs curve instances, which speak this project's container's "
            f"wire, not contract {contract.name}'s; rehearse it on real instances "
            "(local-cloud --container-cmd) or on AWS"
        )
    clock = service_clock(time_scale, target.emulated)
    target.refuse_not_in_service()
    check_build(target, plan)
    scaling = read_live_scaling(session, endpoint, variant, plan)
    return RehearsalTarget(target, clock, scaling, contract)
