"""The soak's record: `soak.md` (the verdicts, the traffic, every sample) and `soak.png` (each
resource over time, per soaked thing, the idle windows shaded)."""

from __future__ import annotations

import csv
import os
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.soak.judge import Verdict
from benchmarks.soak.settings import SoakSettings

COLUMNS = (
    ("t_s", "t s", "{:.0f}"),
    ("phase", "phase", "{}"),
    ("rss_mib", "RSS MiB", "{:.1f}"),
    ("fds", "fds", "{:.0f}"),
    ("client_fds", "client-held", "{:.0f}"),
    ("threads", "threads", "{:.0f}"),
    ("tmp_entries", "TMPDIR entries", "{:.0f}"),
    ("children", "children", "{:.0f}"),
    ("children_rss_mib", "children RSS MiB", "{:.1f}"),
    ("instances", "instances", "{:.0f}"),
    ("in_flight_server", "in flight (servers)", "{:.0f}"),
    ("in_flight_cloud", "in flight (cloud metric)", "{:g}"),
    ("bidi_open", "idle bidi open", "{:.0f}"),
)
PLOTS = (
    ("rss_mib", "RSS MiB"),
    ("own_fds", "open fds less client-held connections"),
    ("threads", "threads"),
    ("tmp_entries", "TMPDIR entries"),
    ("children", "child processes"),
    ("in_flight_server", "in flight (servers' /ping)"),
)


def _cell(row: Mapping[str, Any], key: str, form: str) -> str:
    value = row.get(key)
    return "" if value is None else form.format(value)


def markdown(
    settings: SoakSettings,
    samples: Sequence[Mapping[str, Any]],
    verdicts: Sequence[Verdict],
    outcomes: Mapping[str, Mapping[str, Mapping[str, int]]],
    scaling: Mapping[str, tuple[int, int]],
    forced: int,
    notes: Sequence[str],
    completed: bool,
    started_at: float,
) -> str:
    began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started_at))
    lines = [
        "# Soak: the local cloud and the server over time (issue 40)",
        "",
        f"Run {began}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
        + ("ran to its end." if completed else "**stopped early** (Ctrl-C or an error)."),
        "What it does and the rule behind each bound: [docs/soak.md](../../docs/soak.md).",
        "",
        "    " + shlex.join(["scripts/soak", *sys.argv[1:]]),
        "",
        f"Phases: warm-up {settings.warmup_s:.0f} s, baseline idle {settings.idle_s:.0f} s, "
        f"soak {settings.soak_s:.0f} s, final idle {settings.idle_s:.0f} s (each idle window "
        "then waits for one InService instance per cloud and ends in a burst of samples).",
        "",
        "## Bounds",
        "",
        "| target | bound | figure | verdict |",
        "|---|---|---|---|",
        *(f"| {v.target} | {v.bound} | {v.figure} | {v.word} |" for v in verdicts),
        "",
    ]
    if notes:
        lines += [*(f"- {n}" for n in notes), ""]
    lines += ["## Scaling", ""]
    for name, (outs, ins) in scaling.items():
        how = (
            "forced through UpdateEndpointWeightsAndCapacities"
            if name == "process"
            else ("by the deployed plan's policies")
        )
        lines.append(f"- {name}: {outs} scale-out(s), {ins} scale-in(s), {how}")
    if "process" in scaling:
        lines.append(f"- desired-count changes sent to the process cloud: {forced}")
    lines += ["", "## Traffic (outcomes per kind of client)", ""]
    lines += ["| target | kind | outcomes |", "|---|---|---|"]
    for name, table in outcomes.items():
        for kind, counts in table.items():
            told = ", ".join(f"{o} {n}" for o, n in sorted(counts.items()))
            lines.append(f"| {name} | {kind} | {told} |")
    lines += ["", "## Samples", ""]
    for name in dict.fromkeys(r["target"] for r in samples):
        rows = [r for r in samples if r["target"] == name]
        keys = [c for c in COLUMNS if any(r.get(c[0]) is not None for r in rows)]
        lines += [f"### {name}", ""]
        lines.append("| " + " | ".join(label for _, label, _ in keys) + " |")
        lines.append("|" + "|".join("---" if k == "phase" else "---:" for k, _, _ in keys) + "|")
        for row in rows:
            phase = f"{row['phase']} (burst)" if row["burst"] else row["phase"]
            cells = [phase if k == "phase" else _cell(row, k, f) for k, _, f in keys]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(samples: Sequence[Mapping[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8), sharex=True)
    names = list(dict.fromkeys(r["target"] for r in samples))
    for axis, (key, label) in zip(axes.flat, PLOTS, strict=True):
        for name in names:
            rows = [r for r in samples if r["target"] == name]
            axis.plot([r["t_s"] / 60 for r in rows], [r[key] for r in rows], ".-", label=name)
        for phase in ("baseline", "final"):
            times = [r["t_s"] / 60 for r in samples if r["phase"] == phase]
            if times:
                axis.axvspan(min(times), max(times), color="0.9", zorder=0)
        axis.set_title(label)
        axis.grid(alpha=0.3)
    for axis in axes[1]:
        axis.set_xlabel("minutes into the soak")
    axes[0][0].legend()
    fig.suptitle("Soak: resources per soaked process (grey: the idle windows' bursts)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write(
    settings: SoakSettings,
    samples: Sequence[Mapping[str, Any]],
    verdicts: Sequence[Verdict],
    outcomes: Mapping[str, Mapping[str, Mapping[str, int]]],
    scaling: Mapping[str, tuple[int, int]],
    forced: int,
    notes: Sequence[str],
    completed: bool,
    started_at: float,
) -> list[Path]:
    settings.out.mkdir(parents=True, exist_ok=True)
    # CSV, not JSON: `measurements/*.json` are artifacts (`tts-bench verify` reads them all).
    md, png, raw = (settings.out / n for n in ("soak.md", "soak.png", "soak-samples.csv"))
    md.write_text(
        markdown(settings, samples, verdicts, outcomes, scaling, forced, notes, completed,
                 started_at) + "\n"
    )  # fmt: skip
    plot(samples, png)
    write_csv(samples, raw)
    return [md, png, raw]


def write_csv(samples: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Every sample, one row each; a column a target lacks is empty."""
    columns = list(dict.fromkeys(key for row in samples for key in row))
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, columns, restval="")
        writer.writeheader()
        writer.writerows(samples)
