"""Plots of the measurements (matplotlib, Agg): the ladder's curve and T_total's stages.

- qmax: p95 TTFAB (and p50) against concurrency, the SLO as a horizontal line, the Q_max rung
  marked, rungs that failed or were client-bound marked apart, refinement probes as diamonds,
  achieved throughput on a second axis; below, when recorded, the playback panel (share of
  stalled streams, RTF p50/p95).
- surge: occupancy over time per rate, measured against the birth–death model's mean.
- ttotal: the stages as a timeline of bars in order, counted stages coloured, the uncounted
  warm-up grey, the policy lag bound hatched after the measured total.

Each function takes a validated artifact and writes one PNG; nothing here reads the network.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact

DPI = 120
TTFAB_COLOUR = "#1f5fa8"
P50_COLOUR = "#7ea6d8"
RPS_COLOUR = "#d9822b"
SLO_COLOUR = "#c0392b"
QMAX_COLOUR = "#1e8449"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _subject(fp: Any, provenance: str) -> str:
    if fp is None:
        return f"no fingerprint ({provenance})"
    return (
        f"{fp.model} · {fp.instance_type} · {fp.transport.value} · {fp.short_digest} ({provenance})"
    )


def plot_qmax(artifact: QmaxArtifact, path: str | os.PathLike[str]) -> Path:
    plt = _pyplot()
    heard = [r for r in artifact.curve_rungs if r.underrun_share is not None]
    if heard:
        fig, (ax, ax_play) = plt.subplots(
            2, 1, figsize=(9.5, 7.4), dpi=DPI, height_ratios=(3, 1.25), sharex=True
        )
    else:
        fig, ax = plt.subplots(figsize=(9.5, 5.6), dpi=DPI)
    twin = ax.twinx()
    _throughput_bars(twin, artifact)
    _ttfab_curve(ax, artifact)
    top = max([artifact.slo_ms, *(r.ttfab_p95_ms or 0 for r in artifact.rungs)])
    _failed_rungs(ax, artifact, top)
    probes = _refinement_probes(ax, artifact)
    _q_max_mark(ax, artifact, top)
    if heard:
        _playback_panel(ax_play, heard)
        ax_play.set_xlabel("concurrency per instance (closed-loop users)")
    else:
        ax.set_xlabel("concurrency per instance (closed-loop users)")
    _qmax_frame(ax, twin, artifact, probes, top)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def _throughput_bars(twin: Any, artifact: QmaxArtifact) -> None:
    """Achieved throughput per rung, as bars on the second axis."""
    levels = [r.concurrency for r in artifact.rungs]
    rps = [r.achieved_rps for r in artifact.rungs]
    width = (
        max(0.6, min(b - a for a, b in itertools.pairwise(levels)) * 0.5)
        if len(levels) > 1
        else 0.8
    )
    twin.bar(levels, rps, width=width, color=RPS_COLOUR, alpha=0.28, label="achieved throughput")
    twin.set_ylabel("achieved throughput (requests/s)", color=RPS_COLOUR)
    twin.tick_params(axis="y", colors=RPS_COLOUR)
    twin.set_ylim(0, max([*rps, 1e-9]) * 1.35)


def _ttfab_curve(ax: Any, artifact: QmaxArtifact) -> None:
    """p50 and p95 TTFAB per measured rung, and the SLO."""
    measured = [
        (r.concurrency, r.ttfab_p95_ms, r.ttfab_p50_ms)
        for r in artifact.rungs
        if r.ttfab_p95_ms is not None
    ]
    if measured:
        xs, p95, p50 = zip(*measured, strict=True)
        ax.plot(xs, p50, "o--", color=P50_COLOUR, lw=1.3, ms=4, label="p50 TTFAB")
        ax.plot(xs, p95, "o-", color=TTFAB_COLOUR, lw=2.2, ms=6, label="p95 TTFAB")
    ax.axhline(
        artifact.slo_ms,
        color=SLO_COLOUR,
        ls="--",
        lw=1.6,
        label=f"SLO {artifact.slo_ms:g} ms (p95)",
    )


def _failed_rungs(ax: Any, artifact: QmaxArtifact, top: float) -> None:
    """Rungs that failed the SLO (rings) and client-bound rungs (crosses, at `top` unmeasured)."""
    rungs = artifact.rungs
    failed = [r for r in rungs if r.usable and not r.meets_slo and r.ttfab_p95_ms is not None]
    if failed:
        ax.plot(
            [r.concurrency for r in failed], [r.ttfab_p95_ms for r in failed], "o", ms=11,
            mfc="none", mec=SLO_COLOUR, mew=2, label="fails the SLO",
        )  # fmt: skip
    unusable = [r for r in rungs if not r.usable]
    for r in unusable:
        ax.plot(
            r.concurrency,
            r.ttfab_p95_ms if r.ttfab_p95_ms is not None else top,
            "X",
            ms=11,
            color="#555555",
        )
    if unusable:
        ax.plot([], [], "X", ms=9, color="#555555", label="client-bound (unusable)")


def _refinement_probes(ax: Any, artifact: QmaxArtifact) -> list[Any]:
    """The refinement's probes as diamonds; returns every probe (measured or not)."""
    probes = [p.rung for p in artifact.refinement.probes] if artifact.refinement else []
    probed = [r for r in probes if r.ttfab_p95_ms is not None]
    if probed:
        ax.plot(
            [r.concurrency for r in probed], [r.ttfab_p95_ms for r in probed], "D", ms=7,
            color=TTFAB_COLOUR, mfc="white", mew=1.8,
            label=f"refinement probes (resolution {artifact.q_max_resolution} users)",
        )  # fmt: skip
    return probes


def _q_max_mark(ax: Any, artifact: QmaxArtifact, top: float) -> None:
    """The Q_max rung: a star, a dotted line and its label."""
    q = artifact.q_max_rung()
    if q is None or q.ttfab_p95_ms is None:
        return
    ax.axvline(q.concurrency, color=QMAX_COLOUR, lw=1.2, ls=":")
    ax.plot(
        q.concurrency,
        q.ttfab_p95_ms,
        "*",
        ms=18,
        color=QMAX_COLOUR,
        label=f"Q_max = {q.concurrency}",
    )
    # Keep the label inside the axes: below a high point, above a low one, left of the last rung.
    low = q.ttfab_p95_ms < 0.5 * top
    last = q.concurrency == artifact.rungs[-1].concurrency
    ax.annotate(
        f"Q_max = {q.concurrency}\np95 {q.ttfab_p95_ms:.0f} ms",
        (q.concurrency, q.ttfab_p95_ms), xytext=(-12 if last else 12, 22 if low else -40),
        textcoords="offset points", ha="right" if last else "left",
        color=QMAX_COLOUR, fontsize=10, fontweight="bold",
    )  # fmt: skip


def _qmax_frame(ax: Any, twin: Any, artifact: QmaxArtifact, probes: list[Any], top: float) -> None:
    """Axes, ticks, limits, title and the one legend of both axes."""
    levels = [r.concurrency for r in artifact.rungs]
    ax.set_ylabel("time to first audio byte (ms)")
    ax.set_xticks(sorted({*levels, *(r.concurrency for r in probes)}))
    ax.set_ylim(0, top * 1.18)
    ax.set_xlim(0, levels[-1] + max(1.0, levels[-1] * 0.06))
    ax.grid(True, alpha=0.3)
    ax.set_zorder(twin.get_zorder() + 1)
    ax.patch.set_visible(False)
    outcome = (
        "no rung passed" if artifact.q_max is None
        else f"Q_max {artifact.refined_q_max}, {'bracketed' if artifact.bracketed else 'NOT bracketed (lower bound)'}"
    )  # fmt: skip
    ax.set_title(
        f"Q_max ladder: {outcome}\n{_subject(artifact.fingerprint, artifact.provenance.kind)}",
        fontsize=11,
    )
    handles, labels = ax.get_legend_handles_labels()
    bars, bar_labels = twin.get_legend_handles_labels()
    ax.legend(handles + bars, labels + bar_labels, loc="upper left", fontsize=9, framealpha=0.9)


def _playback_panel(ax: Any, rungs: list[Any]) -> None:
    """Share of streams that stalled (bars) and RTF p50/p95 (lines) per rung."""
    xs = [r.concurrency for r in rungs]
    ax.bar(xs, [100 * r.underrun_share for r in rungs], width=0.6, color=SLO_COLOUR, alpha=0.35,
           label="streams that stalled (%)")  # fmt: skip
    ax.set_ylabel("stalled (%)", color=SLO_COLOUR)
    ax.set_ylim(0, 105)
    ax.grid(True, alpha=0.3)
    rtf = ax.twinx()
    for attr, style, name in (("rtf_p50", "o--", "RTF p50"), ("rtf_p95", "o-", "RTF p95")):
        pts = [(r.concurrency, getattr(r, attr)) for r in rungs if getattr(r, attr) is not None]
        if pts:
            rtf.plot(*zip(*pts, strict=True), style, color=TTFAB_COLOUR, ms=4, label=name)
    rtf.axhline(1.0, color="#555555", lw=0.8, ls=":")
    rtf.set_ylabel("stream ÷ audio duration")
    bars, bar_labels = ax.get_legend_handles_labels()
    lines, line_labels = rtf.get_legend_handles_labels()
    ax.legend(bars + lines, bar_labels + line_labels, loc="upper left", fontsize=8, framealpha=0.9)


def plot_ttotal(artifact: TtotalArtifact, path: str | os.PathLike[str]) -> Path:
    plt = _pyplot()
    stages = artifact.stages
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.52 * (len(stages) + 1)), dpi=DPI)
    palette = plt.get_cmap("tab10")
    # The uncounted warm-up sits before zero; counted stages follow one another from zero.
    start = -sum(s.seconds for s in stages if not s.counted and stages.index(s) == 0)
    labels = []
    t = start
    colour_index = 0
    for row, stage in enumerate(stages):
        colour = "#b0b0b0" if not stage.counted else palette(colour_index % 10)
        colour_index += stage.counted
        ax.barh(row, stage.seconds, left=t, color=colour, edgecolor="black", lw=0.5,
                hatch=None if stage.measured else "..")  # fmt: skip
        note = "" if stage.counted else " (not counted)"
        note += "" if stage.measured else " (bound)"
        ax.text(t + stage.seconds, row, f" {stage.seconds:.1f} s{note}", va="center", fontsize=9)
        labels.append(stage.name)
        t += stage.seconds
    lag_row = len(stages)
    ax.barh(lag_row, artifact.policy_lag_bound_s, left=artifact.measured_total_s, color="white",
            edgecolor=SLO_COLOUR, hatch="//", lw=1)  # fmt: skip
    ax.text(
        artifact.planned_total_s,
        lag_row,
        f" {artifact.policy_lag_bound_s:.1f} s (bound)",
        va="center",
        fontsize=9,
    )
    labels.append("policy detection lag (bound, not a stage)")
    ax.axvline(artifact.measured_total_s, color="black", ls="--", lw=1)
    ax.text(artifact.measured_total_s, lag_row, f"measured {artifact.measured_total_s:.1f} s ", ha="right",
            va="center", fontsize=9)  # fmt: skip
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(
        f"seconds from {stages[0].name.split(' -> ')[-1] if not stages[0].counted else 'the trigger'}"
    )
    ax.set_xlim(min(0.0, start) * 1.05, artifact.planned_total_s * 1.22)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(
        f"T_total ({artifact.trigger.value}): {artifact.measured_total_s:.1f} s measured + "
        f"{artifact.policy_lag_bound_s:.1f} s lag bound = {artifact.planned_total_s:.1f} s planned\n"
        f"{_subject(artifact.fingerprint, artifact.provenance.kind)}",
        fontsize=11,
    )
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_surge(artifact: SurgeArtifact, path: str | os.PathLike[str]) -> Path:
    """Occupancy over time per rate: measured (steps) against the model's mean, Q_max marked."""
    plt = _pyplot()
    runs = artifact.runs
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(10, 2.9 * len(runs) + 0.8), dpi=DPI, squeeze=False
    )
    for ax, run in zip(axes[:, 0], runs, strict=True):
        series = run.occupancy
        times = [i * series.step_s for i in range(len(series.measured))]
        ax.step(times, series.measured, where="post", color=TTFAB_COLOUR, lw=1.6,
                label="measured: admitted requests in flight")  # fmt: skip
        ax.plot(times, series.model_mean, color=RPS_COLOUR, lw=1.8, ls="--",
                label=f"birth–death model, mean of {run.prediction.trials} trials")  # fmt: skip
        ax.axhline(artifact.q_max, color=SLO_COLOUR, ls=":", lw=1.4,
                   label=f"admission bound Q_max = {artifact.q_max}")  # fmt: skip
        ax.set_ylim(0, artifact.q_max * 1.3 + 0.5)
        ax.set_xlim(0, run.duration_s)
        ax.set_ylabel("occupancy")
        ax.grid(True, alpha=0.3)
        ttfab = "-" if run.ttfab_p95_ms is None else f"{run.ttfab_p95_ms:.0f} ms"
        ax.set_title(
            f"{run.rate_rps:g} rps: shed {run.shed_share:.1%} (model "
            f"{run.prediction.shed_share:.1%}), admitted p95 TTFAB {ttfab} from intended send",
            fontsize=10,
        )
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    axes[-1, 0].set_xlabel("seconds from the run's start")
    fig.suptitle(
        f"Open-loop surge against one instance\n"
        f"{_subject(artifact.fingerprint, artifact.provenance.kind)}",
        fontsize=11,
    )
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
