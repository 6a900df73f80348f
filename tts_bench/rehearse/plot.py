"""Both timelines of a rehearsal in one PNG: load, instances, the scaling metric against its
thresholds, sheds. Rehearsed in one colour, simulated in another, over the service's minutes."""

from __future__ import annotations

import os
from pathlib import Path

from tts_bench.artifacts.rehearsal import WINDOW_S, AlarmSeries, RehearsalArtifact, Run
from tts_bench.simulate.plot import DPI, pyplot, save_timeline

REHEARSED, SIMULATED = "#c0392b", "#1f5fa8"


def _scale_out_series(run: Run) -> list[AlarmSeries]:
    return [a for a in run.alarms if a.kind == "high"] or [
        a for a in run.alarms if a.kind == "step"
    ]


def plot_rehearsal(artifact: RehearsalArtifact, title: str, path: str | os.PathLike[str]) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(11, 11), dpi=DPI, sharex=True)
    load_ax, fleet_ax, metric_ax, shed_ax = axes
    weight = artifact.inputs.request_weight
    for run, colour in ((artifact.rehearsed, REHEARSED), (artifact.simulated, SIMULATED)):
        x = [w.t_s / 60 for w in run.windows]
        label = run.source
        load_ax.plot(
            x,
            [w.offered * weight / WINDOW_S for w in run.windows],
            color=colour,
            lw=0.8,
            label=f"{label}: offered (fleet requests/s)",
        )
        fleet_ax.plot(
            x,
            [w.in_service for w in run.windows],
            color=colour,
            lw=1.1,
            label=f"{label}: in service",
        )
        fleet_ax.plot(
            x,
            [w.desired for w in run.windows],
            color=colour,
            lw=0.8,
            ls="--",
            label=f"{label}: desired",
        )
        for series in _scale_out_series(run):
            metric_ax.step(
                [(p.t_s + series.period_s) / 60 for p in series.points],
                [p.value for p in series.points],
                where="pre",
                color=colour,
                lw=0.9,
                label=f"{label}: {series.metric} {series.statistic} {series.period_s:g} s",
            )
        shed_ax.plot(
            x,
            [w.shed * weight / WINDOW_S for w in run.windows],
            color=colour,
            lw=0.9,
            label=f"{label}: shed (fleet requests/s)",
        )
    band = artifact.agreement.desired.band
    if band:
        fleet_ax.fill_between(
            [t / 60 for t, _, _ in band],
            [low for _, low, _ in band],
            [high for _, _, high in band],
            step="post",
            color=SIMULATED,
            alpha=0.15,
            lw=0,
            label=f"desired of the {len(artifact.replays)} replays (lowest–highest)",
        )
    for series in {(a.role, a.kind): a for a in artifact.rehearsed.alarms}.values():
        style = ":" if series.kind == "low" else "--"
        metric_ax.axhline(
            series.threshold,
            color="#555555",
            ls=style,
            lw=0.8,
            label=f"{series.role} {series.kind} {series.threshold:g} ({series.metric})",
        )
    for change in artifact.rehearsed.state_changes:
        if change.new == "ALARM":
            metric_ax.axvline(change.t_s / 60, color=REHEARSED, lw=0.5, alpha=0.4)
    load_ax.set_ylabel("requests/s")
    fleet_ax.set_ylabel("instances")
    metric_ax.set_ylabel("scaling metric")
    shed_ax.set_ylabel("shed\n(requests/s)")
    shed_ax.set_yscale("symlog", linthresh=1.0)
    shed_ax.set_ylim(bottom=0)
    shed_ax.set_xlabel("time (minutes of the service's clock)")
    return save_timeline(fig, axes, title, path)
