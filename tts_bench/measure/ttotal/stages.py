"""T_total's stages: consecutive timestamps, each from its own source, made into `Stage`s.

One builder for every measurement. The first stage, from the moment the probe's load was
applied to the first timestamp, is recorded and not counted (the probe's warm-up); every later
stage runs between consecutive timestamps and is counted (an organic scale-out's detection
stages before `desired_set` are recorded, not counted: its lag is kept apart). Timestamps from
different clocks may step back a little (clock skew, clamped to 0); past `skew_tolerance_s` a
step back is a wrong reading and refused. A local measurement reads one clock (a millisecond of
tolerance); the endpoint's reads ours, CloudWatch Logs' and the container's (a second).

The timestamps themselves are kept in the artifact (`TtotalEvents`), so `tts-bench verify`
recomputes every stage and the total with `stages_from_events` and `measured_total_s`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Final

from tts_bench.artifacts.ttotal import Stage, TimedPoint, TtotalEvents
from tts_bench.measure.ttotal.probe import TtotalError

LOAD_APPLIED: Final = "load_applied"


def timed_stages(
    load_applied: float,
    points: Sequence[tuple[str, float]],
    skew_tolerance_s: float,
    reasons: Mapping[str, str] | None = None,
    counted_from: str | None = None,
) -> list[Stage]:
    """The warm-up stage (not counted), then one stage per pair of consecutive points, counted
    from the point named `counted_from` on (default: the first).

    `reasons` notes a stage by the name of the point it ends at."""
    names = [name for name, _ in points]
    if counted_from is not None and counted_from not in names:
        raise TtotalError(
            f"events.counted_from {counted_from!r} names no point (the points: {', '.join(names)})"
        )
    first_counted = names.index(counted_from) if counted_from is not None else 0
    first, started = points[0]
    stages = [
        Stage(
            name=f"{LOAD_APPLIED} -> {first}",
            seconds=round(max(0.0, started - load_applied), 3),
            measured=True,
            counted=False,
        )
    ]
    for i, ((a, ta), (b, tb)) in enumerate(itertools.pairwise(points)):
        if tb < ta - skew_tolerance_s:
            raise TtotalError(f"stage {a} -> {b} runs backwards ({tb - ta:.3f} s): clocks disagree")
        stages.append(
            Stage(
                name=f"{a} -> {b}",
                seconds=round(max(0.0, tb - ta), 3),
                measured=True,
                reason=(reasons or {}).get(b),
                counted=i >= first_counted,
            )
        )
    return stages


def recorded_events(
    load_applied: float,
    points: Sequence[tuple[str, float]],
    skew_tolerance_s: float,
    reasons: Mapping[str, str] | None = None,
    counted_from: str | None = None,
) -> TtotalEvents:
    """The timestamps a T_total is made from, as the artifact keeps them."""
    return TtotalEvents(
        load_applied_epoch_s=load_applied,
        points=[TimedPoint(name=name, epoch_s=at) for name, at in points],
        skew_tolerance_s=skew_tolerance_s,
        reasons=dict(reasons or {}),
        counted_from=counted_from,
    )


def stages_from_events(events: TtotalEvents) -> list[Stage]:
    return timed_stages(
        events.load_applied_epoch_s,
        [(p.name, p.epoch_s) for p in events.points],
        events.skew_tolerance_s,
        events.reasons,
        events.counted_from,
    )


def measured_total_s(stages: Sequence[Stage]) -> float:
    """The measured T_total: the counted stages' sum, to the millisecond."""
    return round(sum(s.seconds for s in stages if s.counted), 3)
