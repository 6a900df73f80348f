"""The main job's last step: a short rehearsal of the plan it made, on curve instances.

A local cloud of curve instances from the job's own ladder (its fingerprint, its curve) starts
along the job's ttotal with the plan deployed, its clocks `TIME_SCALE` times faster, and
`tts-bench rehearse` drives it (the same code path) with a ramp from half the plan's scale-out
level for its initial fleet to 3.5 times it, over the plan's detection lag, its launch and two
minutes more. The policy sees the load pass its target well inside the run and scales out; the
one instance saturates while the next one launches. The job prints one line: whether the policy
scaled out before shedding, and when each happened.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import AlarmSpec, PlanArtifact, StepSpec, TargetTrackingSpec
from tts_bench.artifacts.rehearsal import RehearsalArtifact
from tts_bench.aws.session import AwsSession
from tts_bench.jobs.aws_environment import aws_environment
from tts_bench.planning.deploy import alarm_rule, deploy_shape_of
from tts_bench.rehearse.arrivals import TrafficSpec
from tts_bench.rehearse.run import RehearsalRequest, rehearse

TIME_SCALE: Final = 30.0  # the cloud's seconds per wall second
WALL_RPS: Final = 20.0  # the most wall-clock traffic at the peak: the rate scale follows
# The ramp, in multiples of the scale-out level for the initial fleet. The curve's instances
# reach the published target (0.75 Q_max) near 2.2 times the level, so a peak of 2.5 put the
# crossing at the ramp's flat top: the scale-out came at 385-405 s of 420, or not at all. At
# 3.5 it comes at 345 s, run after run (test-time.md, stop 50).
LOW, HIGH = 0.5, 3.5
AFTER_S: Final = 120.0  # past detection and launch (the ramp's length; the scale-out comes mid-run)
MAX_INSTANCES: Final = 10
REPLAYS: Final = 3


@dataclass(frozen=True)
class ShortRehearsal:
    line: str
    path: Path | None
    wall_s: float


def ramp(plan: PlanArtifact) -> tuple[str, float, float]:
    """(synthetic spec, duration of the service's clock, rate scale) for the plan's rehearsal."""
    shape = deploy_shape_of(plan)
    level = shape.sizing_rps * plan.min_instances
    slowest = max(
        (alarm_rule(p.role, a).detection_s for p in shape.policies for a in _scale_out_alarms(p)),
        default=0,
    )
    duration = math.ceil((slowest + shape.launch_s + AFTER_S) / 60) * 60
    spec = f"diurnal:{LOW * level:.6g}:{HIGH * level:.6g}:{2 * duration:g}"
    rate_scale = max(1.0, round(HIGH * level / WALL_RPS, 1))
    return spec, float(duration), rate_scale


def _scale_out_alarms(policy: TargetTrackingSpec | StepSpec) -> list[AlarmSpec]:
    if isinstance(policy, TargetTrackingSpec):
        return [policy.high_alarm]
    return [policy.alarm] if policy.alarm.comparison.startswith("Greater") else []


def short_rehearsal(
    qmax: Path, ttotal: Path, plan_path: Path, out: Path, step: Callable[[str], None]
) -> ShortRehearsal:
    """Start the curve cloud, rehearse, stop; the job's one line (never raises for a
    rehearsal that fails: it is a check beside the plan, and the line says why)."""
    from tts_bench.errors import TtsBenchError
    from tts_bench.local_cloud import LocalCloudSettings, local_cloud
    from tts_bench.local_cloud.settings import CurveInstances

    began = time.time()
    plan = load_artifact(plan_path, PlanArtifact)
    spec, duration, rate_scale = ramp(plan)
    settings = LocalCloudSettings(
        curve=CurveInstances(
            qmax=qmax, ttotal=ttotal, plan=plan_path, rate_scale=rate_scale, seed=1
        ),
        time_scale=TIME_SCALE,
        stack_overrides={"maxInstances": max(plan.min_instances + 1, MAX_INSTANCES)},
    )
    step(
        f"rehearsal: {spec} for {duration:g} s on curve instances of this ladder (rate scale "
        f"{rate_scale:g}, clocks × {TIME_SCALE:g})"
    )
    try:
        with local_cloud(settings) as cloud, aws_environment(cloud.env):
            request = RehearsalRequest(
                plan=plan_path,
                endpoint=cloud.endpoint_name,
                variant=cloud.variant_name,
                traffic=TrafficSpec(spec, None, duration),
                out=out,
                replays=REPLAYS,
                qmax=qmax,
                ttotal=ttotal,
            )
            done = rehearse(request, AwsSession.from_environment(), lambda line: None)
    except TtsBenchError as exc:
        return ShortRehearsal(f"rehearsal: not run: {exc}", None, time.time() - began)
    return ShortRehearsal(verdict(done.artifact), done.path, time.time() - began)


def verdict(artifact: RehearsalArtifact) -> str:
    """The one line: whether the policy scaled out before shedding, with the times."""
    run = artifact.rehearsed
    out = next((a for a in run.actions if a.after > a.before), None)
    shed = next((w for w in run.windows if w.shed), None)
    lead = f"rehearsal ({artifact.inputs.duration_s:g} s of the cloud's clock): "
    if out is None:
        return lead + (
            "the policy did not scale out, and nothing was shed"
            if shed is None
            else f"the policy did not scale out; it shed from {shed.t_s - 10:g} s"
        )
    at = f"{out.t_s:.0f} s ({out.before} -> {out.after}, {out.role})"
    if shed is None or out.t_s <= shed.t_s - 10:
        tail = "" if shed is None else f"; it shed later, from {shed.t_s - 10:g} s"
        return lead + f"the policy scaled out before shedding, at {at}{tail}"
    return lead + f"the policy shed from {shed.t_s - 10:g} s, before it scaled out at {at}"
