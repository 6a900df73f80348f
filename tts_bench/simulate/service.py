"""Per-instance behaviour from the ladder: service rate X(n), the SLO line, the CloudWatch ratio.

The simulation needs these at integer occupancies only (an instance holds a whole number of
requests), so the measured curves are tabulated at n = 0 … queue_max_depth once, with the
interpolation the plan uses (`planning.curve`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tts_bench.artifacts.cloudwatch import LADDER_RATIO_STAT
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.planning.curve import Curve, ratio_points, throughput_curve


@dataclass(frozen=True)
class ServiceCurves:
    """What one instance does at each occupancy n (requests in flight, queued + executing).

    `service_rps[n]` is X(n), the departure rate at occupancy n (X(0) = 0). A request admitted
    into occupancy n (itself included) is over the SLO when the ladder's p95 TTFAB at
    concurrency n, interpolated between rungs, exceeds the SLO: `over_slo_from` is the lowest
    such n (past `queue_max_depth` when admission already keeps every request within it).
    """

    service_rps: np.ndarray  # float64[queue_max_depth + 1]
    queue_max_depth: int
    over_slo_from: int
    cw_ratio: Curve | None  # CloudWatch value / client in-flight; None = 1.0 (not measured)
    slo_ms: float
    # What one simulated request counts for in InvocationsPerInstance: 1, or the f requests a
    # slowed instance's request stands for (`slowed`).
    request_weight: float = 1.0

    def cloudwatch_value(self, occupancy: float) -> float:
        """The ConcurrentRequestsPerModel reading for a mean client occupancy."""
        return occupancy * (self.cw_ratio(occupancy) if self.cw_ratio else 1.0)


def ttfab_p95_curve(qmax: QmaxArtifact) -> Curve:
    """p95 TTFAB (ms) against concurrency over the usable rungs that have TTFAB samples."""
    rungs = [r for r in qmax.rungs if r.usable and r.ttfab_p95_ms is not None]
    if not rungs:
        raise ValueError("the ladder has no usable rung with TTFAB samples")
    return Curve(
        xs=tuple(float(r.concurrency) for r in rungs),
        ys=tuple(float(r.ttfab_p95_ms) for r in rungs),  # type: ignore[arg-type]
    )


def cloudwatch_ratio_curve(qmax: QmaxArtifact) -> Curve | None:
    """What CloudWatch reads per request in flight, as a function of occupancy: the sensor.

    The simulated controller sees the metric the way SageMaker would, so this interpolates
    every measured point (ladder and verification rungs, the 10 s Maximum target tracking
    evaluates). The plan's own conversion stays conservative (`planning.curve.ratio_at`); the
    simulation then shows whether that is early enough. None: not measured, read as 1.0.
    """
    points = dict(ratio_points(qmax.rungs, LADDER_RATIO_STAT))
    for v in qmax.verification:
        if v.usable and (ratio := v.cloudwatch_ratios.get(LADDER_RATIO_STAT.key)) is not None:
            points[float(v.concurrency)] = min(points.get(float(v.concurrency), ratio), ratio)
    if not points:
        return None
    xs = sorted(points)
    return Curve(xs=tuple(xs), ys=tuple(points[x] for x in xs))


def service_curves(qmax: QmaxArtifact, queue_max_depth: int) -> ServiceCurves:
    occupancy = np.arange(queue_max_depth + 1, dtype=float)
    x = throughput_curve(qmax.rungs).at(occupancy)
    ttfab = ttfab_p95_curve(qmax).at(occupancy)
    over = np.flatnonzero(ttfab[1:] > qmax.slo_ms)
    return ServiceCurves(
        service_rps=np.ascontiguousarray(x, dtype=np.float64),
        queue_max_depth=queue_max_depth,
        over_slo_from=int(over[0]) + 1 if over.size else queue_max_depth + 1,
        cw_ratio=cloudwatch_ratio_curve(qmax),
        slo_ms=qmax.slo_ms,
    )


def slowed(curves: ServiceCurves, factor: float) -> ServiceCurves:
    """Every X(n) divided by `factor`, each request counting `factor` invocations: the fleet a
    rehearsal on curve instances runs, whose service is slowed (rate scale S) against clocks
    compressed K-fold (factor S × K). Occupancy at a given load per instance is unchanged; its
    transients last `factor` times longer against the policy's clocks."""
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"slow-down {factor!r}: give a positive number")
    return replace(
        curves,
        service_rps=np.ascontiguousarray(curves.service_rps / factor),
        request_weight=curves.request_weight * factor,
    )


def flat_curves(service_rps: float, queue_max_depth: int) -> ServiceCurves:
    """X(n) = μ for n ≥ 1: the M/M/1/K instance the theory checks use."""
    x = np.full(queue_max_depth + 1, float(service_rps))
    x[0] = 0.0
    return ServiceCurves(x, queue_max_depth, queue_max_depth + 1, None, math.inf)
