"""The ladder's Q_max texts and tables beside `sections.ladder_part` (issue 38): Q_max's
interval and basis, each rung's p95 interval, --repeat's bisections side by side."""

from __future__ import annotations

from tts_bench.artifacts.qmax import QmaxArtifact, RefinementProbe
from tts_bench.artifacts.rungs import Rung
from tts_bench.planning.qmax_confidence import describe_basis
from tts_bench.report.page import Html, number, table


def _probe(p: RefinementProbe) -> str:
    rung = p.rung
    verdict = rung.verdict or ("pass" if rung.meets_slo else "fail")
    return f"{rung.concurrency} {verdict if rung.usable else 'client-bound'}"


def repeats_table(a: QmaxArtifact) -> Html | None:
    """One row per repeat (issue 38): its probes in the order held, its Q_max and conservative
    Q_max; the caption names the lowest (what a plan uses) and the spread."""
    repeats = a.repeats
    if repeats is None:
        return None
    rows = [
        [i + 1, ", ".join(map(_probe, r.probes)) or "-", q, number(c, "d") if c else "none",
         r.failing_above, r.ended_by]
        for i, (r, q, c) in enumerate(
            zip(a.refinements, repeats.q_max_each, repeats.conservative_each, strict=True)
        )
    ]  # fmt: skip
    lowest = "none (a repeat's is unknown)" if repeats.q_max is None else str(repeats.q_max)
    return table(
        ["repeat", "probes (users, verdict)", "Q_max", "conservative Q_max", "fails at",
         "ended by"],
        rows,
        f"--repeat {len(rows)}: the bisections around the knee, their probes taking turns; "
        f"Q_max is the lowest conservative value, {lowest}; the repeats' Q_max spread "
        f"{repeats.spread} users",
    )  # fmt: skip


def no_q_max_text(a: QmaxArtifact) -> str:
    """What the report says where the artifact has no Q_max, and why."""
    if a.repeats is not None:
        return "none (a repeat's conservative Q_max is unknown)"
    if a.q_max_basis == "conservative" and a.coarse_q_max is not None:
        return (
            f"none (no rung passed on its p95 interval; the point value is {a.coarse_q_max}: "
            "hold rungs longer)"
        )
    return "none (c=1 failed)"


def q_max_interval_text(a: QmaxArtifact) -> str:
    """Q_max's interval in one line, with which Q_max the artifact's is."""
    interval = a.q_max_interval
    if interval is None:
        return "unknown: the ladder predates the p95 intervals"
    low = "none" if interval.low is None else str(interval.low)
    above = "" if interval.failing_above is None else f", failing at {interval.failing_above}"
    undecided = ", ".join(map(str, interval.undecided)) or "none"
    return (
        f"[{low}, {interval.high}] at {interval.level:.0%}{above}; conservative {low}; "
        f"undecided rungs: {undecided}; Q_max above is {describe_basis(a.q_max_basis)}"
    )


def intervals_table(rows: list[tuple[str, Rung]]) -> Html:
    """Each rung's and probe's p95 TTFAB interval and verdict."""

    def end(value: float | None) -> str:
        return "unbounded" if value is None else number(value, ".0f", "ms")

    return table(
        ["users", "", "p95 TTFAB", "interval lower", "interval upper", "requests", "verdict"],
        [
            [r.concurrency, label, number(r.ttfab_p95_ms, ".0f", "ms"),
             end(r.ttfab_p95_interval.lower_ms), end(r.ttfab_p95_interval.upper_ms),
             r.ttfab_p95_interval.samples, r.verdict or "-"]
            for label, r in rows
            if r.ttfab_p95_interval is not None
        ],
        "p95 TTFAB's confidence interval per rung (order statistics; pass: the upper end meets "
        "the SLO, fail: the lower end misses it)",
    )  # fmt: skip
