"""The ladder's tables beside `sections.ladder_part`: --repeat's bisections side by side."""

from __future__ import annotations

from tts_bench.artifacts.qmax import QmaxArtifact, RefinementProbe
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
