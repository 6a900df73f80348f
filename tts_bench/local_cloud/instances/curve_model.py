"""What a curve instance does, from measured artifacts: pure data and pure rules.

A curve instance stands in for one container on the local cloud at fleet scale (SPEC §13). It
synthesises nothing: it serves its requests in arrival order, the one at the head finishing
after an exponential time at rate X(n) / S for its occupancy n (queued + executing), redrawn
whenever n changes, exactly the chain the simulator runs (`simulate.requests`), with X(n) the
ladder's achieved rps interpolated as the plan interpolates it (`planning.curve`). A request's
first chunk leaves `first_chunk_s` × S after it reaches the head (the c=1 rung's median TTFAB:
at c=1 nothing waits, so that is the first-chunk time), or when the chain finishes it if that
comes first (the chunk is part of its service), so its TTFAB is its own wait plus that, and
queueing is counted once. S (`rate_scale`) slows every instance S-fold, so that a
fleet-scale load fits a small machine: the chain's occupancy law is unchanged, its clock runs
S times slower.

Its start-up follows a ttotal artifact's stages from `desired_set` to `in_service`: the
provisioning (Pending, no log stream yet), then each container marker at its measured offset,
`ready` with the last of them, and InService after SageMaker's health-check stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import RefusalError
from tts_bench.planning.curve import Curve, throughput_curve
from tts_bench.telemetry import STARTUP_MARKERS

ServiceLaw = Literal["exponential", "deterministic"]
DESIRED_SET: Final = "desired_set"
INSTANCE_VISIBLE: Final = "instance_visible"
IN_SERVICE: Final = "in_service"
READY: Final = "ready"
_CONTAINER_MARKERS: Final = tuple(m for m in STARTUP_MARKERS if m != READY)


@dataclass(frozen=True)
class CurveModel:
    """One instance's service: X(n) from the ladder, the c=1 first-chunk time, the rate scale.

    `service` is `exponential` (the simulator's chain; what a rehearsal compares with) or
    `deterministic` (each head request takes 1 / rate at the occupancy it started at; for
    tests that need a request to hold its slot for a known time).

    `chunks` is the stream's audio chunks: 1, the first chunk only; 2, a second one when the
    chain finishes the request, as a two-sentence stream's second sentence, so a listener
    stalls whenever the service outlasts the first chunk's audio (playback's tests).
    """

    throughput: Curve
    first_chunk_s: float
    rate_scale: float = 1.0
    service: ServiceLaw = "exponential"
    chunks: Literal[1, 2] = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_scale) and self.rate_scale > 0):
            raise RefusalError(f"--rate-scale {self.rate_scale!r}: give a positive number")
        if self.chunks not in (1, 2):
            raise ValueError(f"chunks {self.chunks!r}: a stream of 1 or 2 chunks")

    @classmethod
    def from_qmax(
        cls, qmax: QmaxArtifact, rate_scale: float = 1.0, service: ServiceLaw = "exponential"
    ) -> CurveModel:
        c1 = next((r for r in qmax.rungs if r.concurrency == 1 and r.usable), None)
        if c1 is None or c1.ttfab_p50_ms is None:
            raise RefusalError(
                "--qmax: the ladder has no usable c=1 rung with TTFAB samples; curve instances "
                "take their first-chunk time from it"
            )
        try:
            curve = throughput_curve(qmax.rungs)
        except ValueError as exc:
            raise RefusalError(f"--qmax: {exc}") from None
        return cls(curve, c1.ttfab_p50_ms / 1000.0, rate_scale, service)

    def rate_rps(self, occupancy: int) -> float:
        """Departures per second at `occupancy`: X(n) / S."""
        return self.throughput(float(occupancy)) / self.rate_scale

    @property
    def first_chunk_after_s(self) -> float:
        return self.first_chunk_s * self.rate_scale

    def service_s(self, occupancy: int, unit_exponential: float) -> float:
        """Seconds until the head request finishes at `occupancy`, from one Exp(1) draw."""
        rate = self.rate_rps(occupancy)
        if rate <= 0:
            return math.inf
        return (unit_exponential if self.service == "exponential" else 1.0) / rate


@dataclass(frozen=True)
class StartupStep:
    at_s: float  # seconds after the instance became visible (its log stream exists)
    event: str  # a container marker, or `in_service`


@dataclass(frozen=True)
class StartupTimeline:
    """A ttotal artifact's start-up: `provisioning_s` before the instance is visible, then its
    markers; every figure as measured (the local cloud divides them by its time scale)."""

    provisioning_s: float
    steps: tuple[StartupStep, ...]

    @property
    def in_service_s(self) -> float:
        return self.steps[-1].at_s

    @classmethod
    def from_ttotal(cls, ttotal: TtotalArtifact) -> StartupTimeline:
        """Follow the stages from `desired_set` through `instance_visible` and the container's
        markers to `in_service`; `ready` is logged with the last marker."""
        seconds = {}
        for stage in ttotal.stages:
            start, _, end = (part.strip() for part in stage.name.partition("->"))
            seconds[start] = (end, stage.seconds)
        if seconds.get(DESIRED_SET, ("",))[0] != INSTANCE_VISIBLE:
            raise RefusalError(
                f"--ttotal: its stages do not start {DESIRED_SET} -> {INSTANCE_VISIBLE} (trigger "
                f"{ttotal.trigger.value}); curve instances start along a scale-out's stages"
            )
        provisioning = seconds[DESIRED_SET][1]
        at, here, steps = 0.0, INSTANCE_VISIBLE, []
        while here != IN_SERVICE:
            if here not in seconds:
                raise RefusalError(f"--ttotal: its stages stop at {here}, before {IN_SERVICE}")
            here, gap = seconds[here]
            at += gap
            if here in _CONTAINER_MARKERS:
                steps.append(StartupStep(at, here))
            elif here != IN_SERVICE:
                raise RefusalError(f"--ttotal: stage to {here!r} is no start-up stage")
        if not steps:
            raise RefusalError("--ttotal: no container marker between visible and in_service")
        steps.append(StartupStep(steps[-1].at_s, READY))
        steps.append(StartupStep(at, IN_SERVICE))
        return cls(provisioning, tuple(steps))


def unit_exponentials(rng: np.random.Generator, count: int = 4096) -> list[float]:
    """A block of Exp(1) draws: one scalar call per event costs more than the event."""
    return rng.standard_exponential(count).tolist()
