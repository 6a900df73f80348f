"""SageMaker's scaling semantics over the 10 s metric, shared by both models.

Each metric period the model hands over one datapoint: the period's Maximum of the mean
in-flight requests over InService instances, in CloudWatch units (ConcurrentRequestsPerModel,
high resolution). From those the controller applies, as Application Auto Scaling does:

- target tracking (scale-out only): when the last `target_datapoints` datapoints all exceed
  the target, desired = ceil(in service × datapoint / target), never lowered; within the
  scale-out cooldown a further scale-out happens only when it asks for more (AWS counts the
  capacity the first one added);
- the step scale-in: the alarm's statistic over `scale_in_period_s` of datapoints, at or below
  the threshold for `scale_in_datapoints` periods in a row, removes one instance, then waits
  `scale_in_cooldown_s`; never within the scale-out cooldown, never below min;
- the burst step of `plan+burst` (see `policies`);
- min/max bounds. A launched instance serves `start_delay_s` (planned T_total) after the alarm
  that asked for it; a removal cancels a launching instance first, else retires the
  least-loaded one in service (its in-flight requests finish off the books).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

from tts_bench.planning.rounding import ceil9
from tts_bench.simulate.deploy_shape import ScalingShape
from tts_bench.simulate.policies import Policy


@dataclass(frozen=True)
class Decision:
    retire: int  # in-service instances to take out now


class Controller:
    """The desired count and the launches under way for one policy; methods change state."""

    def __init__(self, shape: ScalingShape, policy: Policy, initial: int) -> None:
        self.shape = shape
        self.policy = policy
        self.desired = initial
        self.launching: list[float] = []  # serve times, ascending
        self._recent: deque[float] = deque(maxlen=shape.target_datapoints)
        self._per_scale_in_period = max(1, round(shape.scale_in_period_s / shape.metric_period_s))
        self._scale_in_window: list[float] = []
        self._scale_in_stats: deque[float] = deque(maxlen=shape.scale_in_datapoints)
        self._last_scale_out_s = -math.inf
        self._last_scale_in_s = -math.inf
        self._last_burst_s = -math.inf

    def next_serving_s(self) -> float:
        return self.launching[0] if self.launching else math.inf

    def take_serving(self, now_s: float) -> int:
        """How many launches serve by `now_s` (they leave the launching list)."""
        ready = bisect.bisect_right(self.launching, now_s)
        del self.launching[:ready]
        return ready

    def on_datapoint(self, now_s: float, datapoint: float, in_service: int) -> Decision:
        if not self.policy.scales:
            return Decision(0)
        wanted = self._scale_out_wanted(now_s, datapoint, in_service)
        if wanted > self.desired:
            self.launching += [now_s + self.shape.start_delay_s] * (wanted - self.desired)
            self.desired = wanted
            self._last_scale_out_s = now_s
            self._scale_in_stats.clear()  # the alarm starts over after a scale-out
            return Decision(0)
        return Decision(self._scale_in(now_s, datapoint))

    def _scale_out_wanted(self, now_s: float, datapoint: float, in_service: int) -> int:
        shape, wanted = self.shape, self.desired
        self._recent.append(datapoint)
        if len(self._recent) == shape.target_datapoints and min(self._recent) > shape.target_value:
            wanted = max(wanted, ceil9(in_service * datapoint / shape.target_value))
        burst = self.policy.burst
        if (
            burst is not None
            and datapoint >= burst.threshold
            and now_s - self._last_burst_s >= burst.cooldown_s
        ):
            self._last_burst_s = now_s
            wanted = max(wanted, ceil9(in_service * burst.factor))
        return min(wanted, self.policy.max_instances)

    def _scale_in(self, now_s: float, datapoint: float) -> int:
        shape = self.shape
        self._scale_in_window.append(datapoint)
        if len(self._scale_in_window) < self._per_scale_in_period:
            return 0
        window, self._scale_in_window = self._scale_in_window, []
        statistic = (
            max(window) if shape.scale_in_statistic == "Maximum" else sum(window) / len(window)
        )
        self._scale_in_stats.append(statistic)
        in_alarm = (
            len(self._scale_in_stats) == shape.scale_in_datapoints
            and max(self._scale_in_stats) <= shape.scale_in_threshold
        )
        if (
            not in_alarm
            or now_s - self._last_scale_in_s < shape.scale_in_cooldown_s
            or now_s - self._last_scale_out_s < shape.scale_out_cooldown_s
        ):
            return 0
        target = max(self.policy.min_instances, self.desired + shape.scale_in_step)
        removed, self.desired = self.desired - target, target
        if removed:
            self._last_scale_in_s = now_s
        cancelled = min(removed, len(self.launching))
        if cancelled:
            del self.launching[-cancelled:]
        return removed - cancelled
