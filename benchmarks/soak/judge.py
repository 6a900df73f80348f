"""The soak's bounds, judged over a sample series: pure arithmetic, no processes.

Resources are compared between two idle windows with the fleets at their base size: the
baseline, right after the warm-up, and the final one, at the end of the run. Each window ends
in a burst of a few samples. A leak grows steadily, so it lifts even the smallest final sample
above the largest baseline one; a connection still closing, or a thread that has not exited
yet, lifts one sample only. Hence the rule: a count has grown when the *minimum* of the final
burst exceeds the *maximum* of the baseline burst (descriptors less the connections the soak's
own clients hold open, which are theirs to close: `probe`), and RSS has grown by
`min(final) / max(baseline) - 1`. In-flight counters must read 0 at *every* final sample:
idle is idle (and a counter that could not be read, NaN, is no 0). Faults (5xx, a broken stream, a reset on a request the client sent whole and
kept reading) must be 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RSS_GROWTH_BOUND = 0.05  # ≤ 5 % after the warm-up (issue 40)
COUNTS = ("own_fds", "threads", "tmp_entries", "children")
COUNT_LABELS = {
    "own_fds": "open file descriptors (less client-held connections)",
    "threads": "threads",
    "tmp_entries": "TMPDIR entries",
    "children": "child processes",
}


@dataclass(frozen=True)
class Verdict:
    target: str
    bound: str
    figure: str
    passed: bool | None  # None: not judged (the run ended before its window)

    @property
    def word(self) -> str:
        return {True: "PASS", False: "FAIL", None: "NOT JUDGED"}[self.passed]


def rss_growth(baseline: Sequence[float], final: Sequence[float]) -> float:
    """The smallest final RSS over the largest baseline one, minus 1."""
    return min(final) / max(baseline) - 1.0


def count_grew(baseline: Sequence[int], final: Sequence[int]) -> bool:
    return min(final) > max(baseline)


def _largest(values: Sequence[float]) -> float:
    """The largest value; NaN (a counter that could not be read) wins, so it never passes."""
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def judge_target(
    target: str,
    baseline: Sequence[Mapping[str, float]],
    final: Sequence[Mapping[str, float]],
    counters: Sequence[str],
    faults: int,
) -> list[Verdict]:
    """Every bound for one soaked thing; `baseline` and `final` are its burst samples (dicts
    with `rss_mib`, the COUNTS and each name in `counters`), `faults` its server faults."""
    verdicts = [
        Verdict(target, "0 × 5xx not caused by the client", f"{faults} fault(s)", faults == 0)
    ]
    if not baseline or not final:
        missing = "the baseline" if not baseline else "the final idle window"
        for bound in ("RSS growth ≤ 5 %", *(f"no growth in {COUNT_LABELS[c]}" for c in COUNTS)):
            verdicts.append(Verdict(target, bound, f"no samples of {missing}", None))
        verdicts.append(Verdict(target, "in-flight counters 0 when idle", "no final samples", None))
        return verdicts
    growth = rss_growth([s["rss_mib"] for s in baseline], [s["rss_mib"] for s in final])
    verdicts.append(
        Verdict(
            target,
            "RSS growth ≤ 5 %",
            f"{max(s['rss_mib'] for s in baseline):.1f} → {min(s['rss_mib'] for s in final):.1f}"
            f" MiB ({growth:+.1%})",
            growth <= RSS_GROWTH_BOUND,
        )
    )
    for count in COUNTS:
        before = [int(s[count]) for s in baseline]
        after = [int(s[count]) for s in final]
        verdicts.append(
            Verdict(
                target,
                f"no growth in {COUNT_LABELS[count]}",
                f"max {max(before)} → min {min(after)}",
                not count_grew(before, after),
            )
        )
    busy = {c: _largest([float(s[c]) for s in final]) for c in counters}
    figure = (
        ", ".join(f"{c} not read" if math.isnan(v) else f"{c} max {v:g}" for c, v in busy.items())
        or "no counters"
    )
    verdicts.append(
        Verdict(
            target,
            "in-flight counters 0 when idle",
            figure,
            all(v == 0 for v in busy.values()),
        )
    )
    return verdicts
