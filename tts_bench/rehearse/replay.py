"""A rehearsal replayed in the simulator: the same arrivals, the same fleet, the same rules.

Nothing is re-stated here: the fleet is `simulate.requests` (every request, in order, at the
exact times the rehearsal sent them), the controller `simulate.controller` applying the plan's
deploy shape through `planning.aws.scaling`, one period at a time through `simulate.replay`.
What the replay takes from the rehearsed endpoint is what the endpoint is:

- its bounds (the operator's clamp of the plan's min and max) and the fleet it started with;
- the curve slowed f = S × K-fold (`simulate.service.slowed`): on a compressed local cloud of
  curve instances each instance serves X(n) ÷ S per wall second, so X(n) ÷ (S × K) per second of
  the cloud's clock, while the metric counts each request f times (the fleet it stands for);
- a new instance serving the ttotal's `desired_set -> in_service` after the action (where curve
  instances, and SageMaker's routing, start serving), not its measured total, which adds the
  probe's recovery (`simulate` plans with that).

`unscaled` runs the fleet model on the fleet's own traffic and curve (f = 1): what the real
fleet would do, beside what the slowed one did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics
from tts_bench.rehearse.agreement import Steps
from tts_bench.simulate.controller import Controller
from tts_bench.simulate.deploy_shape import ScalingShape, scaling_shape
from tts_bench.simulate.fleet import FleetQueues
from tts_bench.simulate.policies import Policy
from tts_bench.simulate.replay import PolicyRun, replay
from tts_bench.simulate.requests import RequestQueues
from tts_bench.simulate.service import ServiceCurves, service_curves, slowed
from tts_bench.simulate.traffic import Traffic

DESIRED_SET = "desired_set"
IN_SERVICE = "in_service"


def in_service_after_s(ttotal: TtotalArtifact) -> float:
    """Seconds from the desired count set to the new instance InService: the ttotal's stages
    from `desired_set` through `in_service`; its measured total when they are not there."""
    seconds, here = 0.0, DESIRED_SET
    stages = {s.name.partition("->")[0].strip(): s for s in ttotal.stages if s.counted}
    while here != IN_SERVICE:
        stage = stages.get(here)
        if stage is None:
            return ttotal.measured_total_s
        seconds += stage.seconds
        here = stage.name.partition("->")[2].strip()
    return round(seconds, 3)


@dataclass(frozen=True)
class ReplaySetup:
    """Everything a replay of one rehearsal needs besides its arrivals and seed."""

    shape: ScalingShape
    curves: ServiceCurves
    policy: Policy
    initial: int

    @classmethod
    def of(
        cls,
        plan: PlanArtifact,
        qmax: QmaxArtifact,
        ttotal: TtotalArtifact,
        bounds: tuple[int, int],
        initial: int,
        slow_down: float,
        semantics: AwsSemantics = DOCUMENTED,
    ) -> ReplaySetup:
        shape = replace(scaling_shape(plan, semantics), start_delay_s=in_service_after_s(ttotal))
        curves = service_curves(qmax, shape.queue_max_depth)
        if slow_down != 1.0:
            curves = slowed(curves, slow_down)
        policy = Policy("plan", True, bounds[0], bounds[1], shape.rules)
        return cls(shape, curves, policy, initial)


def replay_arrivals(
    setup: ReplaySetup, times_s: np.ndarray, duration_s: float, seed: int
) -> PolicyRun:
    """The request-level model over exactly these arrivals."""
    rng = np.random.default_rng(seed)
    queues = RequestQueues(setup.curves, times_s, setup.initial, rng)
    controller = Controller(setup.shape, setup.policy, setup.initial)
    return replay(queues, controller, setup.curves, setup.shape, duration_s)


def desired_steps(run: PolicyRun, initial: int) -> Steps:
    """A replay's desired count over time, from `initial` at 0 s (what agreement compares)."""
    line = run.timeline
    return Steps([0.0, *map(float, line.end_s)], [float(initial), *map(float, line.desired)])


def unscaled(setup: ReplaySetup, traffic: Traffic, seed: int) -> PolicyRun:
    """The fleet model over the fleet's own traffic (`setup` built with no slow-down)."""
    rng = np.random.default_rng(seed)
    queues = FleetQueues(setup.curves, traffic, setup.initial, rng)
    controller = Controller(setup.shape, setup.policy, setup.initial)
    return replay(queues, controller, setup.curves, setup.shape, traffic.duration_s)
