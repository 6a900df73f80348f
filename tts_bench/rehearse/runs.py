"""The two runs as the artifact records them: per 10 s window, per alarm, per action.

The rehearsed run is made from the client's samples (by intended send time, on the service's
clock), the endpoint's polled counts and what CloudWatch and Application Auto Scaling gave back;
the simulated one from the replay's timeline and the controller's actions. Both runs' alarms
carry their datapoints at the alarm's own statistic and period, and both runs' scale-outs their
detection lag, reconstructed the same way (`agreement`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tts_bench.artifacts.rehearsal import (
    WINDOW_S,
    AlarmSeries,
    Point,
    Run,
    RunTotals,
    ScaleAction,
    StateChange,
    Window,
)
from tts_bench.aws.live_scaling import DeployedAlarm
from tts_bench.aws.scaling_record import Poll, ReadBack
from tts_bench.measure.samples import Sample
from tts_bench.measure.transport.stream_events import Outcome
from tts_bench.planning.aws import scaling as aws_scaling
from tts_bench.rehearse.agreement import Action, Steps, detection_lags
from tts_bench.simulate.deploy_shape import ScalingShape
from tts_bench.simulate.replay import PolicyRun
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Rehearsed:
    """What a rehearsal recorded, before it is judged."""

    samples: Sequence[Sample]
    polls: Sequence[Poll]
    read_back: ReadBack
    to_run_s: Callable[[float], float]  # a sample's epoch time → seconds of the run
    duration_s: float
    initial: int


def _window_count(duration_s: float) -> int:
    return max(1, math.ceil(duration_s / WINDOW_S - 1e-9))


def desired_steps(polls: Sequence[Poll]) -> tuple[Steps, Steps]:
    times = [p.t_s for p in polls]
    return (
        Steps(times, [float(p.desired) for p in polls]),
        Steps(times, [float(p.in_service) for p in polls]),
    )


def _series(alarm: DeployedAlarm, points: Sequence[aws_scaling.Datapoint]) -> AlarmSeries:
    rule = alarm.rule
    return AlarmSeries(
        name=rule.name,
        role=alarm.role,
        kind=alarm.kind,  # type: ignore[arg-type]
        metric=rule.metric,
        statistic=rule.statistic,
        period_s=rule.period_s,
        threshold=rule.threshold,
        comparison=rule.comparison,
        points=[Point(t_s=round(p.start_s, 3), value=p.value) for p in points],
    )


def rehearsed_run(record: Rehearsed, alarms: Sequence[DeployedAlarm]) -> Run:
    count = _window_count(record.duration_s)
    offered, shed, errors = (np.zeros(count, dtype=int) for _ in range(3))
    ttfab: list[list[float]] = [[] for _ in range(count)]
    for sample in record.samples:
        at = record.to_run_s(sample.intended_start or sample.start)
        i = min(max(int(at // WINDOW_S), 0), count - 1)
        offered[i] += 1
        if sample.outcome is Outcome.REJECTED:
            shed[i] += 1
        elif sample.outcome is Outcome.ERROR:
            errors[i] += 1
        elif (ms := sample.intended_ttfab_ms) is not None:
            ttfab[i].append(ms)
    desired, serving = desired_steps(record.polls)
    windows = [
        Window(
            t_s=(i + 1) * WINDOW_S,
            offered=int(offered[i]),
            admitted=int(offered[i] - shed[i]),
            shed=int(shed[i]),
            errors=int(errors[i]),
            desired=_count(desired.at((i + 1) * WINDOW_S, record.initial)),
            in_service=_count(serving.at((i + 1) * WINDOW_S, record.initial)),
            ttfab_p95_wall_ms=round(float(np.percentile(ttfab[i], 95)), 1) if ttfab[i] else None,
        )
        for i in range(count)
    ]
    actions = _rehearsed_actions(record, desired)
    rules = {a.rule.name: a.rule for a in alarms}
    lags = detection_lags(actions, rules, record.read_back.datapoints, record.duration_s)
    roles = {a.rule.name: a.role for a in alarms}
    causes = [a.cause for a in record.read_back.activities]
    requests = int(offered.sum())
    return Run(
        source="rehearsed",
        totals=_totals(requests, int(shed.sum()), int(errors.sum()), desired, record),
        windows=windows,
        alarms=[_series(a, record.read_back.datapoints.get(a.rule.name, [])) for a in alarms],
        state_changes=[
            StateChange(t_s=round(t.t_s, 3), alarm=t.alarm, old=t.old, new=t.new)
            for t in record.read_back.transitions
        ],
        actions=[
            ScaleAction(
                t_s=round(a.t_s, 3),
                before=a.before,
                after=a.after,
                role=roles.get(a.alarm or ""),
                alarm=a.alarm,
                cause=cause,
                lag_s=lag,
            )
            for a, cause, lag in zip(actions, causes, lags, strict=True)
        ],
    )


def _count(value: float) -> int | None:
    return None if math.isnan(value) else int(value)


def _rehearsed_actions(record: Rehearsed, desired: Steps) -> list[Action]:
    """Each scaling activity, its count before read from the polls where AWS does not say."""
    actions = []
    for activity in record.read_back.activities:
        before = activity.before
        if before < 0:
            before = int(desired.at(activity.t_s - 1e-3, record.initial))
        actions.append(Action(activity.t_s, before, activity.after, activity.alarm))
    return actions


def _totals(requests: int, shed: int, errors: int, desired: Steps, record: Rehearsed) -> RunTotals:
    hours = desired.integral(0.0, record.duration_s, record.initial) / SECONDS_PER_HOUR
    peak = max([record.initial, *(int(v) for v in desired.values)])
    return RunTotals(
        requests=requests,
        shed=shed,
        shed_share=round(shed / requests, 9) if requests else 0.0,
        errors=errors,
        instance_hours=round(hours, 4),
        peak_desired=peak,
    )


# --------------------------------------------------------------------------- the replay


def simulated_alarms(shape: ScalingShape) -> list[DeployedAlarm]:
    """The replay's alarms under the controller's names, by role and kind."""
    found = []
    for rule in shape.rules:
        if isinstance(rule, aws_scaling.TrackingRule):
            found.append(DeployedAlarm(rule.policy_name, "high", rule.high))
            if rule.low is not None:
                found.append(DeployedAlarm(rule.policy_name, "low", rule.low))
        else:
            found.append(DeployedAlarm(rule.policy_name, "step", rule.alarm))
    return found


def timeline_points(run: PolicyRun, rule: aws_scaling.AlarmRule) -> list[aws_scaling.Datapoint]:
    """The replay's 10 s windows of the alarm's metric (as the controller saw them)."""
    line = run.timeline
    values = (
        line.datapoint
        if rule.metric == CONCURRENT_REQUESTS_PER_MODEL
        else (line.invocations_per_instance)
    )
    return [
        aws_scaling.Datapoint(float(end) - WINDOW_S, float(v))
        for end, v in zip(line.end_s, values, strict=True)
    ]


def at_period(
    windows: Sequence[aws_scaling.Datapoint], rule: aws_scaling.AlarmRule, end_s: float
) -> list[aws_scaling.Datapoint]:
    """The windows as the alarm's periods: each period's windows reduced by its statistic."""
    count = max(1, math.floor(end_s / rule.period_s + 1e-9))
    values = aws_scaling.period_datapoints(windows, rule.period_s, rule.statistic, count, end_s)
    return [
        aws_scaling.Datapoint(float(k * rule.period_s), v)
        for k, v in enumerate(values)
        if v is not None
    ]


def simulated_run(run: PolicyRun, shape: ScalingShape, initial: int) -> Run:
    line = run.timeline
    alarms = simulated_alarms(shape)
    duration = float(line.end_s[-1]) if len(line.end_s) else 0.0
    windows = [
        Window(
            t_s=float(line.end_s[i]),
            offered=int(line.offered[i]),
            admitted=int(line.offered[i] - line.shed[i]),
            shed=int(line.shed[i]),
            desired=int(line.desired[i]),
            in_service=int(line.in_service[i]),
        )
        for i in range(len(line.end_s))
    ]
    points = {
        a.rule.name: at_period(timeline_points(run, a.rule), a.rule, duration) for a in alarms
    }
    actions = [Action(t, a.before, a.after, a.alarm or None) for t, a in run.actions]
    rules = {a.rule.name: a.rule for a in alarms}
    lags = detection_lags(actions, rules, points, duration, slack_s=0.0)
    return Run(
        source="simulated",
        totals=RunTotals(
            requests=run.requests,
            shed=run.shed,
            shed_share=round(run.shed / run.requests, 9) if run.requests else 0.0,
            instance_hours=round(run.instance_seconds / SECONDS_PER_HOUR, 4),
            peak_desired=int(max([initial, *line.desired.tolist()])),
        ),
        windows=windows,
        alarms=[_series(a, points[a.rule.name]) for a in alarms],
        actions=[
            ScaleAction(
                t_s=round(t, 3),
                before=a.before,
                after=a.after,
                role=a.policy,
                alarm=a.alarm,
                cause=a.reason,
                lag_s=lag,
            )
            for (t, a), lag in zip(run.actions, lags, strict=True)
        ],
    )
