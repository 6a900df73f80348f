"""One policy over one traffic: the queues (either model) driven by the controller, period by period.

Both models run through `replay`, so they share the metric, the scaling semantics and the
bookkeeping; they differ only in how requests queue, which is what their agreement tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.planning.rounding import ceil9
from tts_bench.simulate.controller import Controller, Window
from tts_bench.simulate.deploy_shape import ScalingShape
from tts_bench.simulate.fleet import FleetQueues, Segment
from tts_bench.simulate.policies import Policy
from tts_bench.simulate.requests import RequestQueues
from tts_bench.simulate.service import ServiceCurves
from tts_bench.simulate.traffic import Traffic


class Queues(Protocol):
    @property
    def in_service(self) -> int: ...
    def advance(self, until_s: float) -> Segment: ...
    def add(self, count: int) -> None: ...
    def retire_least_loaded(self, count: int) -> None: ...


@dataclass(frozen=True)
class Timeline:
    """One row per metric period (10 s), ending at `end_s`."""

    end_s: np.ndarray
    offered: np.ndarray  # arrivals in the period
    shed: np.ndarray
    over_slo: np.ndarray
    desired: np.ndarray  # at the period's end, after the controller acted
    in_service: np.ndarray  # during the period (at its end, if an instance came in)
    mean_occupancy: np.ndarray  # time-average of requests in flight per in-service instance
    datapoint: np.ndarray  # ConcurrentRequestsPerModel as the controller saw it (CloudWatch units)
    invocations_per_instance: np.ndarray  # InvocationsPerInstance as the controller saw it


@dataclass(frozen=True)
class PolicyRun:
    policy: str
    requests: int
    shed: int
    over_slo: int
    instance_seconds: float  # provisioned: in service or launching
    peak_instances: int  # the most instances provisioned at once
    timeline: Timeline
    actions: tuple[tuple[float, aws_scaling.Action], ...] = ()  # what the policies did, when


def initial_instances(policy: Policy, traffic: Traffic, sizing_rps: float) -> int:
    """A scaling fleet starts sized as the plan sizes one for the first minute's rate."""
    if not policy.scales or sizing_rps <= 0:
        return policy.min_instances
    needed = ceil9(traffic.rate_at_start_rps() / sizing_rps)
    # A schedule ran the day before: its minimum at 00:00 is held from the start.
    floor = max(policy.min_instances, policy.scheduled_min_at_start())
    return min(max(needed, floor), policy.max_instances)


def replay(
    queues: Queues,
    controller: Controller,
    curves: ServiceCurves,
    shape: ScalingShape,
    duration_s: float,
) -> PolicyRun:
    periods = max(1, math.ceil(duration_s / shape.metric_period_s - 1e-9))
    rows = np.zeros((periods, 9))
    requests = shed = over = 0
    instance_s = 0.0
    peak = controller.desired
    for p in range(periods):
        start_s = p * shape.metric_period_s
        end_s = min((p + 1) * shape.metric_period_s, duration_s)
        provisioned = controller.desired
        busiest = area_per_instance = per_instance = invocations = 0.0
        arrived = shed_p = over_p = 0
        while True:
            stop_s = min(end_s, controller.next_serving_s())
            seg = queues.advance(stop_s)
            serving = queues.in_service
            arrived, shed_p, over_p = (
                arrived + seg.arrived,
                shed_p + seg.shed,
                over_p + seg.over_slo,
            )
            if serving:
                busiest = max(busiest, seg.peak_occupancy / serving)
                area_per_instance += seg.occupancy_s / serving
                per_instance += seg.arrived * curves.request_weight / serving
                invocations += seg.arrived * curves.request_weight
            if stop_s >= end_s:
                break
            queues.add(controller.take_serving(stop_s))
        queues.add(controller.take_serving(end_s))
        datapoint = curves.cloudwatch_value(busiest)
        decision = controller.on_window(Window(end_s, datapoint, per_instance, invocations))
        queues.retire_least_loaded(decision.retire)
        instance_s += provisioned * (end_s - start_s)
        peak = max(peak, controller.desired)
        requests, shed, over = requests + arrived, shed + shed_p, over + over_p
        rows[p] = (
            end_s, arrived, shed_p, over_p, controller.desired, queues.in_service,
            area_per_instance / max(end_s - start_s, 1e-12), datapoint, per_instance,
        )  # fmt: skip
    timeline = Timeline(*(rows[:, i].copy() for i in range(9)))
    return PolicyRun(
        controller.policy.name, requests, shed, over, instance_s, peak, timeline,
        tuple(controller.actions),
    )  # fmt: skip


def run_fleet_model(
    curves: ServiceCurves,
    shape: ScalingShape,
    policy: Policy,
    traffic: Traffic,
    sizing_rps: float,
    rng: np.random.Generator,
) -> PolicyRun:
    start = initial_instances(policy, traffic, sizing_rps)
    queues = FleetQueues(curves, traffic, start, rng)
    return replay(queues, Controller(shape, policy, start), curves, shape, traffic.duration_s)


def run_request_model(
    curves: ServiceCurves,
    shape: ScalingShape,
    policy: Policy,
    traffic: Traffic,
    sizing_rps: float,
    rng: np.random.Generator,
) -> PolicyRun:
    start = initial_instances(policy, traffic, sizing_rps)
    queues = RequestQueues(curves, traffic.arrival_times_s(rng), start, rng)
    return replay(queues, Controller(shape, policy, start), curves, shape, traffic.duration_s)
