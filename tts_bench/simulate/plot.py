"""The run's timeline as one PNG: offered load, instances, occupancy, shed and over-SLO.

Four panels over time, one colour per policy: offered load (one line, the same for all);
instances in service (solid) and desired (dashed); the mean occupancy per instance against
C_scale_max and Q_max; shed and over-SLO requests per second (symlog: linear below 1/s).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from tts_bench.simulate.replay import PolicyRun

DPI = 110
COLOURS = ("#1f5fa8", "#c0392b", "#1e8449", "#d9822b", "#7d3c98", "#566573")


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_timeline(
    runs: list[PolicyRun], c_scale_max: float, q_max: int, title: str, path: str | os.PathLike[str]
) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(11, 10), dpi=DPI, sharex=True)
    load_ax, fleet_ax, occupancy_ax, loss_ax = axes
    span_s = runs[0].timeline.end_s[-1] if len(runs[0].timeline.end_s) else 1.0
    unit, scale = ("h", 3600.0) if span_s > 3 * 3600 else ("min", 60.0)
    for i, run in enumerate(runs):
        line = run.timeline
        x = line.end_s / scale
        period_s = np.diff(line.end_s, prepend=0.0)
        colour = COLOURS[i % len(COLOURS)]
        if i == 0:
            load_ax.plot(x, line.offered / period_s, color="#333333", lw=0.8, label="offered")
        fleet_ax.plot(x, line.in_service, color=colour, lw=1.1, label=f"{run.policy} in service")
        fleet_ax.plot(x, line.desired, color=colour, lw=0.8, ls="--", label=f"{run.policy} desired")
        occupancy_ax.plot(x, line.mean_occupancy, color=colour, lw=0.8, label=run.policy)
        loss_ax.plot(x, line.shed / period_s, color=colour, lw=0.9, label=f"{run.policy} shed")
        if line.over_slo.any():
            loss_ax.plot(
                x,
                line.over_slo / period_s,
                color=colour,
                lw=0.8,
                ls=":",
                label=f"{run.policy} over SLO",
            )
    occupancy_ax.axhline(
        c_scale_max, color="#888888", ls="--", lw=0.8, label=f"C_scale_max {c_scale_max:g}"
    )
    occupancy_ax.axhline(q_max, color="#000000", ls=":", lw=0.8, label=f"Q_max {q_max}")
    load_ax.set_ylabel("requests/s")
    fleet_ax.set_ylabel("instances")
    occupancy_ax.set_ylabel("mean in flight\nper instance")
    loss_ax.set_ylabel("shed, over SLO\n(requests/s)")
    # symlog: a policy shedding thousands a second beside one shedding a few
    loss_ax.set_yscale("symlog", linthresh=1.0)
    loss_ax.set_ylim(bottom=0)
    loss_ax.set_xlabel(f"time ({unit})")
    return save_timeline(fig, axes, title, path)


def save_timeline(fig: Any, axes: Any, title: str, path: str | os.PathLike[str]) -> Path:
    """A stacked timeline finished alike everywhere: grids, legends, title; written and closed."""
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    target = Path(path)
    fig.savefig(target)
    pyplot().close(fig)
    return target
