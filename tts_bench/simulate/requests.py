"""The request-level reference model: every request and every instance, one event at a time.

Small and plain on purpose, so that it can be read against SPEC §12 and trusted; the fleet
model (`fleet`) must agree with it. Each instance keeps its requests in arrival order; an
arriving request goes to the in-service instance with the fewest outstanding requests (the
first such, by index), and is shed when even that one holds `queue_max_depth`. An instance
holding n requests finishes one after an exponential time at rate X(n); because the rate
changes with n, its pending finish is redrawn whenever n changes (exact, as the exponential
has no memory). A request is over the SLO when it joins at an occupancy whose measured p95
TTFAB exceeds the SLO.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from tts_bench.simulate.fleet import Segment
from tts_bench.simulate.service import ServiceCurves


@dataclass
class Instance:
    requests: deque[float] = field(default_factory=deque)  # arrival times, oldest first
    version: int = 0  # stamp of its current finish event; older events are stale


class RequestQueues:
    """The same interface as `fleet.FleetQueues`, over explicit requests."""

    def __init__(
        self,
        curves: ServiceCurves,
        arrivals_s: np.ndarray,
        in_service: int,
        rng: np.random.Generator,
    ) -> None:
        self.curves = curves
        self.rng = rng
        self.arrivals_s = arrivals_s.tolist()  # plain floats: numpy scalars are slow one at a time
        self.service_rps = curves.service_rps.tolist()
        self.next_arrival = 0
        self.now_s = 0.0
        self.instances: list[Instance] = []
        self.finishes: list[tuple[float, int, int]] = []  # (time, instance id, version)
        self._exponentials: list[float] = []
        self._stamps = 0  # one counter for all instances, so a reused id never revives an event
        self.add(in_service)

    @property
    def in_service(self) -> int:
        return len(self.instances)

    def _total(self) -> int:
        return sum(len(i.requests) for i in self.instances)

    def _schedule(self, index: int) -> None:
        instance = self.instances[index]
        self._stamps += 1
        instance.version = self._stamps
        rate = self.service_rps[len(instance.requests)]
        if rate > 0:
            when = self.now_s + self._unit_exponential() / rate
            heapq.heappush(self.finishes, (when, index, instance.version))

    def _unit_exponential(self) -> float:
        # Drawn from the Generator a block at a time: one scalar call per event costs more than the event.
        if not self._exponentials:
            self._exponentials = self.rng.standard_exponential(4096).tolist()
        return self._exponentials.pop()

    def _next_finish(self) -> tuple[float, int]:
        while self.finishes:
            when, index, version = self.finishes[0]
            if index < len(self.instances) and self.instances[index].version == version:
                return when, index
            heapq.heappop(self.finishes)
        return math.inf, -1

    def advance(self, until_s: float) -> Segment:
        arrived = shed = over = 0
        total = peak = self._total()
        area = 0.0
        while True:
            finish_s, finisher = self._next_finish()
            arrival_s = (
                self.arrivals_s[self.next_arrival]
                if self.next_arrival < len(self.arrivals_s)
                else math.inf
            )
            event_s = min(finish_s, arrival_s)
            if event_s >= until_s:
                area += total * (until_s - self.now_s)
                self.now_s = until_s
                return Segment(arrived, shed, over, peak, area)
            area += total * (event_s - self.now_s)
            self.now_s = event_s
            if arrival_s <= finish_s:
                self.next_arrival += 1
                arrived += 1
                if not self.instances:
                    shed += 1
                    continue
                target = min(
                    range(len(self.instances)), key=lambda i: len(self.instances[i].requests)
                )
                queue = self.instances[target].requests
                if len(queue) >= self.curves.queue_max_depth:
                    shed += 1
                    peak = max(peak, total + 1)  # received, then refused: counted that moment
                    continue
                queue.append(event_s)
                total += 1
                peak = max(peak, total)
                over += len(queue) >= self.curves.over_slo_from
                self._schedule(target)
            else:
                heapq.heappop(self.finishes)
                self.instances[finisher].requests.popleft()
                total -= 1
                self._schedule(finisher)

    def add(self, count: int) -> None:
        for _ in range(count):
            self.instances.append(Instance())

    def retire_least_loaded(self, count: int) -> None:
        for _ in range(count):
            index = min(range(len(self.instances)), key=lambda i: len(self.instances[i].requests))
            # Swap it to the end so the other instances keep their ids (and their finishes).
            last = len(self.instances) - 1
            self.instances[index], self.instances[last] = (
                self.instances[last],
                self.instances[index],
            )
            self.instances.pop()
            if index != last:
                self._schedule(index)
