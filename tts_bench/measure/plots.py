"""Plots of the measurements (matplotlib, Agg): the ladder's curve and T_total's stages.

- qmax: p95 TTFAB (and p50) against concurrency, the SLO as a horizontal line, the Q_max rung
  marked, rungs that failed or were client-bound marked apart, and achieved throughput on a
  second axis.
- ttotal: the stages as a timeline of bars in order, counted stages coloured, the uncounted
  warm-up grey, the policy lag bound hatched after the measured total.

Each function takes a validated artifact and writes one PNG; nothing here reads the network.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from tts_bench.artifacts.schema import QmaxArtifact, TtotalArtifact

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
    rungs = artifact.rungs
    levels = [r.concurrency for r in rungs]
    fig, ax = plt.subplots(figsize=(9.5, 5.6), dpi=DPI)
    twin = ax.twinx()

    rps = [r.achieved_rps for r in rungs]
    width = (
        max(0.6, min(b - a for a, b in itertools.pairwise(levels)) * 0.5)
        if len(levels) > 1
        else 0.8
    )
    twin.bar(levels, rps, width=width, color=RPS_COLOUR, alpha=0.28, label="achieved throughput")
    twin.set_ylabel("achieved throughput (requests/s)", color=RPS_COLOUR)
    twin.tick_params(axis="y", colors=RPS_COLOUR)
    twin.set_ylim(0, max([*rps, 1e-9]) * 1.35)

    measured = [
        (r.concurrency, r.ttfab_p95_ms, r.ttfab_p50_ms) for r in rungs if r.ttfab_p95_ms is not None
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

    failed = [r for r in rungs if r.usable and not r.meets_slo and r.ttfab_p95_ms is not None]
    if failed:
        ax.plot(
            [r.concurrency for r in failed], [r.ttfab_p95_ms for r in failed], "o", ms=11,
            mfc="none", mec=SLO_COLOUR, mew=2, label="fails the SLO",
        )  # fmt: skip
    unusable = [r for r in rungs if not r.usable]
    top = max([artifact.slo_ms, *(r.ttfab_p95_ms or 0 for r in rungs)])
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

    q = artifact.rung(artifact.q_max) if artifact.q_max else None
    if q is not None and q.ttfab_p95_ms is not None:
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
        last = q.concurrency == levels[-1]
        ax.annotate(
            f"Q_max = {q.concurrency}\np95 {q.ttfab_p95_ms:.0f} ms",
            (q.concurrency, q.ttfab_p95_ms), xytext=(-12 if last else 12, 22 if low else -40),
            textcoords="offset points", ha="right" if last else "left",
            color=QMAX_COLOUR, fontsize=10, fontweight="bold",
        )  # fmt: skip

    ax.set_xlabel("concurrency per instance (closed-loop users)")
    ax.set_ylabel("time to first audio byte (ms)")
    ax.set_xticks(levels)
    ax.set_ylim(0, top * 1.18)
    ax.set_xlim(0, levels[-1] + max(1.0, levels[-1] * 0.06))
    ax.grid(True, alpha=0.3)
    ax.set_zorder(twin.get_zorder() + 1)
    ax.patch.set_visible(False)
    outcome = (
        "no rung passed" if artifact.q_max is None
        else f"Q_max {artifact.q_max}, {'bracketed' if artifact.bracketed else 'NOT bracketed (lower bound)'}"
    )  # fmt: skip
    ax.set_title(
        f"Q_max ladder: {outcome}\n{_subject(artifact.fingerprint, artifact.provenance.kind)}",
        fontsize=11,
    )
    handles, labels = ax.get_legend_handles_labels()
    bars, bar_labels = twin.get_legend_handles_labels()
    ax.legend(handles + bars, labels + bar_labels, loc="upper left", fontsize=9, framealpha=0.9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


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
