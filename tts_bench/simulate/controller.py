"""SageMaker's scaling semantics over the simulated metrics, shared by both models.

Each 10 s window the model hands over what SageMaker would publish for it: the
ConcurrentRequestsPerModel reading (the window's Maximum of the mean in-flight over InService
instances, in CloudWatch units through the measured ratio), the InvocationsPerInstance sum
(each arrival counted 1/N, N the instances in service when it came, shed or not) and the
Invocations sum (each counted once; a metric-math alarm reads the fleet's size from both). Every alarm
of the deployed policies is evaluated at the end of each of its periods over those windows, and
`planning.aws.scaling.ScalingEngine` (the statement of AWS's rules the local cloud applies too)
decides: proportional target tracking, step policies, cooldowns, min/max.

What the controller adds is the fleet and the endpoint: a launched instance serves
`start_delay_s` (the measured T_total) after the action that asked for it; a removal cancels
launching instances first, else retires the least-loaded in service (its in-flight requests
finish off the books). The endpoint is Updating from a capacity change until its launches serve
(a scale-out) or for the set's `scale_in_updating_s` (a scale-in); where the set says a change
is refused then, the action fails (a failed scaling activity: no cooldown, tried again at the
alarm's next invocation) and is counted in `refusals`.

Scheduled actions (a plan made with `--schedule`) set MinCapacity when their crons run, read as
deployed (`Policy.scheduled_runs`: a day's runs at a time, from a Monday 00:00 UTC).
AWS: "If current capacity is less than the specified minimum capacity, Application Auto Scaling
scales out (increases capacity) to the specified minimum capacity" (Application Auto Scaling
user guide, "How scheduled scaling for Application Auto Scaling works"); a lower minimum
removes nothing, the policies scale in as before, within the new bounds. A scheduled scale-out
refused while the endpoint is Updating is tried again each 10 s window (assumption: AWS says
only that capacity is brought within the bounds whenever a policy is invoked).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.simulate.deploy_shape import ScalingShape
from tts_bench.simulate.policies import Policy
from tts_bench.telemetry import (
    CONCURRENT_REQUESTS_PER_MODEL,
    SAGEMAKER_INVOCATIONS,
    SAGEMAKER_INVOCATIONS_PER_INSTANCE,
)

DAY_S = 86_400.0  # the scheduled runs are read a day ahead at a time


@dataclass(frozen=True)
class Decision:
    retire: int  # in-service instances to take out now


@dataclass(frozen=True)
class Window:
    """What SageMaker publishes for one 10 s window, as the replay measured it."""

    end_s: float
    concurrency: float  # ConcurrentRequestsPerModel, CloudWatch units
    invocations_per_instance: float
    invocations: float = 0.0  # the variant's Invocations (a fleet-aware alarm reads both)


class Controller:
    """The desired count and the launches under way for one policy; methods change state."""

    def __init__(self, shape: ScalingShape, policy: Policy, initial: int) -> None:
        self.shape = shape
        self.policy = policy
        self.desired = initial
        self.launching: list[float] = []  # serve times, ascending
        self.engine = aws_scaling.ScalingEngine(policy.rules, shape.semantics)
        self.updating_until_s = -math.inf
        self.refusals: list[tuple[float, aws_scaling.Action]] = []  # failed activities
        alarms = self.engine.alarms
        keep = max((a.lookback_s for a in alarms), default=0) // int(shape.metric_period_s) + 2
        self._windows: dict[str, deque[aws_scaling.Datapoint]] = {
            metric: deque(maxlen=keep)
            for metric in (
                CONCURRENT_REQUESTS_PER_MODEL,
                SAGEMAKER_INVOCATIONS,
                SAGEMAKER_INVOCATIONS_PER_INSTANCE,
            )
        }
        self._alarms = alarms
        self.actions: list[tuple[float, aws_scaling.Action]] = []  # (when, what), in order
        self.min_now = policy.scheduled_min_at_start()  # the runs up to time 0 included
        self._runs: deque[tuple[float, int | None]] = deque()
        self._read_until_s = 0.0

    def _hold_schedule(self, now_s: float) -> None:
        """Apply the scheduled actions due by `now_s`, and scale out to a minimum not held."""
        while self.policy.schedule and self._read_until_s < now_s:
            start = self._read_until_s
            self._read_until_s += DAY_S
            self._runs.extend(self.policy.scheduled_runs(start, self._read_until_s))
        while self._runs and self._runs[0][0] <= now_s:
            _, minimum = self._runs.popleft()
            if minimum is not None:
                self.min_now = min(minimum, self.policy.max_instances)
        if self.desired >= self.min_now:
            return
        action = aws_scaling.Action("scheduled", "MinCapacity", self.desired, self.min_now)
        if self.shape.semantics.refuse_while_updating and now_s < self.updating_until_s:
            self.refusals.append((now_s, action))
            return
        self.actions.append((now_s, action))
        self._apply(action, now_s)

    def next_serving_s(self) -> float:
        return self.launching[0] if self.launching else math.inf

    def take_serving(self, now_s: float) -> int:
        """How many launches serve by `now_s` (they leave the launching list)."""
        ready = bisect.bisect_right(self.launching, now_s)
        del self.launching[:ready]
        return ready

    def on_window(self, window: Window) -> Decision:
        if not self.policy.scales:
            return Decision(0)
        self._hold_schedule(window.end_s)
        start_s = window.end_s - self.shape.metric_period_s
        self._windows[CONCURRENT_REQUESTS_PER_MODEL].append(
            aws_scaling.Datapoint(start_s, window.concurrency)
        )
        self._windows[SAGEMAKER_INVOCATIONS_PER_INSTANCE].append(
            aws_scaling.Datapoint(start_s, window.invocations_per_instance)
        )
        self._windows[SAGEMAKER_INVOCATIONS].append(
            aws_scaling.Datapoint(start_s, window.invocations)
        )
        readings = {
            alarm.name: aws_scaling.read_alarm(
                alarm,
                self._windows[alarm.metric],
                window.end_s,
                self._windows[SAGEMAKER_INVOCATIONS],
            )
            for alarm in self._alarms
            if aws_scaling.due(alarm, window.end_s)
        }
        if not readings:
            return Decision(0)
        bounds = (max(self.policy.min_instances, self.min_now), self.policy.max_instances)
        action = self.engine.decide(window.end_s, readings, self.desired, bounds)
        if action is None:
            return Decision(0)
        if self.shape.semantics.refuse_while_updating and window.end_s < self.updating_until_s:
            self.engine.refused(action)
            self.refusals.append((window.end_s, action))
            return Decision(0)
        self.actions.append((window.end_s, action))
        return Decision(self._apply(action, window.end_s))

    def _apply(self, action: aws_scaling.Action, now_s: float) -> int:
        self.desired = action.after
        if action.out:
            serves_s = now_s + self.shape.start_delay_s
            self.launching += [serves_s] * (action.after - action.before)
            self.updating_until_s = max(self.updating_until_s, serves_s)
            return 0
        self.updating_until_s = max(
            self.updating_until_s, now_s + self.shape.semantics.scale_in_updating_s
        )
        removed = action.before - action.after
        cancelled = min(removed, len(self.launching))
        if cancelled:
            del self.launching[-cancelled:]
        return removed - cancelled
