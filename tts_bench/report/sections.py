"""The report's sections, one per kind of artifact, and the provenance of every file.

Each `*_part` renders one artifact (`Item`) as an `<article>`; `SECTIONS` says in which
section each kind appears and in what order. Every figure comes from the artifact as written;
nothing is recomputed here except what `tts-bench plan` prints (`render_plan`), shown when the
plan's two sources are at hand.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tts_bench.artifacts.cloudwatch import CloudWatchUnits
from tts_bench.artifacts.fingerprint import OWN_CONTRACT
from tts_bench.artifacts.plan import PlanArtifact, TargetTrackingSpec, Verdict
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rehearsal import DesiredAgreement, RehearsalArtifact
from tts_bench.artifacts.rungs import Rung
from tts_bench.artifacts.simulation import SimulationArtifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.planning.report import render_plan
from tts_bench.report.ladder_tables import (
    intervals_table,
    no_q_max_text,
    q_max_interval_text,
    repeats_table,
)
from tts_bench.report.page import (
    Html,
    figure,
    join,
    key_values,
    note,
    number,
    pre,
    subsection,
    table,
    yes_no,
)
from tts_bench.report.plan_tables import schedule_table, traffic_check_table

Artifact = (
    QmaxArtifact
    | TtotalArtifact
    | PlanArtifact
    | SurgeArtifact
    | SimulationArtifact
    | RehearsalArtifact
)


@dataclass(frozen=True, slots=True)
class Item:
    """One artifact file as the report shows it: validated, its hash, and its plot (drawn here
    or found beside it)."""

    path: Path
    kind: str
    artifact: Artifact
    sha256: str
    anchor: str  # its article's id on the page
    png: bytes | None = None
    png_note: str = ""  # where the plot came from, or why there is none


def _plot(item: Item, what: str) -> Html:
    if item.png is None:
        return note(f"No plot: {item.png_note}")
    return figure(item.png, f"{what}: {item.path.name}", f"{what}: {item.png_note}")


def _verdict(verdict: Verdict | str) -> tuple[str, str]:
    value = str(verdict.value if isinstance(verdict, Verdict) else verdict)
    return value.upper() if value != "ok" else value, value


# --------------------------------------------------------------------------- ladder


def _rung_verdict(rung: Rung) -> tuple[str, str]:
    if not rung.usable:
        return f"unusable: {rung.unusable_reason}", "stop"
    return ("passes", "ok") if rung.meets_slo else ("fails the SLO", "warn")


def _ladder_rows(artifact: QmaxArtifact) -> list[tuple[str, Rung]]:
    probes = [p.rung for p in artifact.refinement.probes] if artifact.refinement else []
    labelled = [("rung", r) for r in artifact.rungs] + [("probe", r) for r in probes]
    return sorted(labelled, key=lambda pair: pair[1].concurrency)


def _ratios(rung: Rung) -> str:
    ratios = {"Maximum/10s": rung.cloudwatch_ratio} if rung.cloudwatch_ratio else {}
    ratios |= rung.cloudwatch_ratios
    return ", ".join(f"{k} ×{v:.3f}" for k, v in ratios.items()) or "-"


def _verification(a: QmaxArtifact) -> Html:
    rows = [
        [v.role, v.source, number(v.surge_ratio, "g"), v.concurrency,
         number(v.achieved_rps, ".3g"), number(v.ttfab_p95_ms, ".0f", "ms"),
         number(v.client_mean_in_flight, ".2f"),
         ", ".join(f"{k} ×{x:.3f}" for k, x in v.cloudwatch_ratios.items()),
         yes_no(v.usable) + (f": {v.unusable_reason}" if v.unusable_reason else "")]
        for v in a.verification
    ]  # fmt: skip
    headers = ["role", "source", "surge ratio", "users", "achieved rps", "p95 TTFAB", "in flight",
               "CloudWatch ratios", "usable"]  # fmt: skip
    return table(headers, rows, "Verification rungs (CloudWatch's ratio where the thresholds sit)")


def ladder_part(item: Item, a: QmaxArtifact) -> Html:
    settings = a.ladder
    summary = [
        ("Q_max", number(a.refined_q_max, "d") if a.refined_q_max else no_q_max_text(a)),
        ("bracketed", yes_no(a.bracketed)),
        ("resolution (users)", number(a.q_max_resolution, "d")),
        ("Q_max interval (p95 intervals)", q_max_interval_text(a)),
        ("SLO (p95 TTFAB)", number(a.slo_ms, "g", "ms")),
        ("uncontended service S, S_p95",
         "-" if a.uncontended_service_s is None else
         f"{a.uncontended_service_s.mean * 1000:.1f} ms, {a.uncontended_service_s.p95 * 1000:.1f} ms"),
    ]  # fmt: skip
    if settings is not None:
        summary += [
            ("rungs", ", ".join(map(str, settings.rungs))),
            ("hold / measure / idle", f"{settings.hold_s:g} s / {settings.measure_s:g} s / {settings.idle_s:g} s"),
            ("longest hold when unstable", number(settings.max_hold_s, "g", "s")),
            ("underrun SLO (share of stalled streams)", number(settings.underrun_slo_share, "g")),
        ]  # fmt: skip
    if a.refinement is not None:
        r = a.refinement
        summary.append(
            ("refinement", f"{len(r.probes)} probes to {r.resolution_pct:g} %, ended by {r.ended_by}")
        )  # fmt: skip
    rows = _ladder_rows(a)
    latency = table(
        ["users", "", "verdict", "p50 TTFAB", "p95 TTFAB", "p99 TTFAB", "latency mean",
         "latency p95", "achieved rps", "ok / completed", "rejected", "errors", "in flight",
         "server first chunk p95", "CloudWatch ratio", "client CPU"],
        [
            [r.concurrency, label, _rung_verdict(r), number(r.ttfab_p50_ms, ".0f", "ms"),
             number(r.ttfab_p95_ms, ".0f", "ms"), number(r.ttfab_p99_ms, ".0f", "ms"),
             number(r.latency_mean_ms, ".0f", "ms"), number(r.latency_p95_ms, ".0f", "ms"),
             number(r.achieved_rps, ".3g"), f"{r.ok} / {r.completed}", r.rejected, r.errors,
             number(r.client_mean_in_flight, ".2f"), number(r.server_first_chunk_p95_ms, ".0f", "ms"),
             _ratios(r), number(r.client_cpu_percent, ".0f", "%")]
            for label, r in rows
        ],
        "Latency and throughput per rung (measure window)",
    )  # fmt: skip
    heard = table(
        ["users", "", "stable", "p95 TTFAB of each third", "RTF p50", "RTF p95",
         "streams that stalled", "stall p95"],
        [
            [r.concurrency, label, yes_no(r.stable),
             ", ".join(number(v, ".0f") for v in r.sub_window_ttfab_p95_ms or []) or "-",
             number(r.rtf_p50, ".3f"), number(r.rtf_p95, ".3f"),
             number(None if r.underrun_share is None else 100 * r.underrun_share, ".1f", "%"),
             number(r.stall_ms_p95, ".0f", "ms")]
            for label, r in rows
        ],
        "Stability (window thirds agree within 10 %) and playback (stream ÷ audio duration)",
    )  # fmt: skip
    parts = [key_values(summary), _plot(item, "Q_max ladder"), latency, heard]
    if a.q_max_interval is not None:
        parts.append(intervals_table(rows))
    if (repeats := repeats_table(a)) is not None:
        parts.append(repeats)
    if a.verification:
        parts.append(_verification(a))
    return subsection(item.path.name, *parts, id_=item.anchor)


# --------------------------------------------------------------------------- T_total


def _recovery_bound(a: TtotalArtifact) -> str:
    b = a.recovery_baseline
    if b is None:
        return "-"
    again = (
        f"{b.remeasured_p95_ms:.0f} ms just before the scale-out ({b.remeasured_requests} requests)"
        if b.remeasured_p95_ms is not None
        else f"not measured again: {b.why_not_remeasured}"
    )
    return (
        f"{b.bound_ms:.0f} ms: {b.factor:g} × the larger of {b.ladder_p95_ms:.0f} ms in the "
        f"ladder and {again}"
    )


def ttotal_part(item: Item, a: TtotalArtifact) -> Html:
    summary = [
        ("trigger", a.trigger.value),
        ("measured total", number(a.measured_total_s, ".1f", "s")),
        ("policy detection lag (bound, not a stage)", number(a.policy_lag_bound_s, ".1f", "s")),
        ("planned T_total", number(a.planned_total_s, ".1f", "s")),
        ("recovery rule", a.recovery_rule or "-"),
        ("recovery bound", _recovery_bound(a)),
        ("ladder recovery was judged by (sha256)", (a.qmax_sha256 or "-", "hash")),
    ]
    stages = table(
        ["#", "stage", "seconds", "reading", "counted in the total"],
        [
            [i + 1, s.name, number(s.seconds, ".1f", "s"),
             "measured" if s.measured else f"bound: {s.reason}", yes_no(s.counted)]
            for i, s in enumerate(a.stages)
        ],
        "Stages, in order, each from its own source of timestamps",
    )  # fmt: skip
    return subsection(
        item.path.name, key_values(summary), _plot(item, "T_total stages"), stages, id_=item.anchor
    )


# --------------------------------------------------------------------------- plan


def _units(units: CloudWatchUnits) -> str:
    return (
        f"{units.metric} {units.statistic} over {units.period_s} s, "
        f"ratio ×{units.cw_ratio:.3f} ({units.ratio_rule})"
    )


def _deployed_numbers(p: PlanArtifact) -> Html:
    rows = [
        ("C_scale_max", number(p.c_scale_max, ".4g"), "client concurrency per instance where scale-out acts"),
        ("scaling target value", number(p.scaling_target_value, ".3f"), _units(p.target_units)),
        ("C_scale_min", number(p.c_scale_min, ".4g"), "client concurrency per instance where scale-in acts"),
        ("scale-in threshold", number(p.scale_in_threshold, ".3f"), _units(p.scale_in_units)),
        ("W_max", number(p.w_max_s, ".3f", "s"), "the queueing headroom: SLO − S_p95"),
        ("scale-out cooldown", number(p.scale_out_cooldown_s, "d", "s"), ""),
        ("scale-in cooldown", number(p.scale_in_cooldown_s, "d", "s"), ""),
        ("queue_max_depth (MAX_QUEUE_DEPTH)", number(p.queue_max_depth, "d"), "the container's admission bound"),
        ("FirstChunkLatency p95 alarm", number(p.first_chunk_alarm_ms, "d", "ms"), p.alarm_rule),
        ("min instances", number(p.min_instances, "d"), ""),
        ("max instances", number(p.max_instances, "d"), ""),
    ]  # fmt: skip
    return table(["deployed number", "value", "units / derivation"], rows, "Deployed numbers")


def _policy_rows(p: PlanArtifact) -> Iterator[list[object]]:
    for spec in p.deploy.policies if p.deploy else []:
        if isinstance(spec, TargetTrackingSpec):
            alarms = [("high", spec.high_alarm), ("low", spec.low_alarm)]
            acts = (
                f"target {spec.target_value:g} on {spec.predefined_metric}; cooldowns out "
                f"{spec.scale_out_cooldown_s} s, in {spec.scale_in_cooldown_s or '-'} s"
                + ("; scale-in disabled" if spec.disable_scale_in else "")
            )
        else:
            alarms = [("alarm", spec.alarm)]
            steps = ", ".join(f"{s.adjustment:+d}" for s in spec.steps)
            acts = f"{spec.adjustment_type} {steps}; cooldown {spec.cooldown_s} s"
        for which, alarm in alarms:
            if alarm is None:
                continue
            yield [
                f"{spec.kind} ({spec.role})", which, acts,
                f"{alarm.metric} {alarm.statistic} {alarm.period_s} s",
                f"{alarm.comparison} {alarm.threshold:g}",
                f"{alarm.datapoints_to_alarm} of {alarm.evaluation_periods}",
                alarm.treat_missing_data,
            ]  # fmt: skip


def _fleet_levels(p: PlanArtifact) -> Html:
    """Each of the fleet rule's levels with its derivation, as the schema states it."""
    if p.fleet is None:
        return Html("")
    fields = type(p.fleet).model_fields
    rows = []
    for name, value in p.fleet:
        if isinstance(value, BaseModel):
            continue  # units and the burst step appear in the deploy shape
        rows.append([name, number(value, ".4g"), fields[name].description or ""])
    return table(["level", "value", "derivation"], rows, "Fleet rule: load levels")


def _printed_plan(p: PlanArtifact, others: Sequence[Item]) -> Html:
    """The plan as `tts-bench plan` printed it, when both its sources are among the files."""
    by_hash = {o.sha256: o.artifact for o in others}
    qmax = by_hash.get(p.sources["qmax"].sha256)
    ttotal = by_hash.get(p.sources["ttotal"].sha256)
    if not isinstance(qmax, QmaxArtifact) or not isinstance(ttotal, TtotalArtifact):
        return note(
            "The plan as `tts-bench plan` prints it needs its qmax and ttotal artifacts: pass "
            "them to `tts-bench report` too (matched by sha256)."
        )
    return join([Html("<h4>As <code>tts-bench plan</code> prints it</h4>"), pre(render_plan(p, qmax, ttotal))])  # fmt: skip


def plan_part(item: Item, p: PlanArtifact, others: Sequence[Item]) -> Html:
    i = p.inputs
    summary = [
        ("plan id", p.plan_id),
        ("rule", p.rule),
        ("feasible", ("yes", "ok") if p.feasible else ("NO: a finding is stop", "stop")),
        ("SLO (p95 TTFAB)", number(i.slo_ms, "g", "ms")),
        ("surge ratio", number(i.surge_ratio, "g")),
        ("peak / trough", f"{i.peak_rps:g} / {i.trough_rps:g} requests/s"),
        ("Q_max", number(i.q_max, "d")),
        ("S mean / p95 (c=1)", f"{i.service_mean_s * 1000:.1f} ms / {i.service_p95_s * 1000:.1f} ms"),
        ("p95 TTFAB at c=1", number(i.ttfab_p95_c1_ms, ".0f", "ms")),
        ("planned T_total", number(i.planned_total_s, ".1f", "s")),
        ("minimum floor", number(i.min_floor, "d")),
        ("fingerprint mismatch allowed", yes_no(i.allow_config_mismatch)),
    ]  # fmt: skip
    findings = table(
        ["verdict", "finding", "message", "figures"],
        [
            [_verdict(f.verdict), f.name, f.message,
             ", ".join(f"{k}={v}" for k, v in (f.model_extra or {}).items()) or "-"]
            for f in p.findings
        ],
        "Findings, worst first",
    )  # fmt: skip
    policies = table(
        ["policy", "alarm", "acts", "reads", "fires when", "datapoints", "missing data"],
        _policy_rows(p),
        "Deploy shape: every scaling construct the stack creates",
    )
    parts = [
        key_values(summary), _deployed_numbers(p), policies, _fleet_levels(p), findings,
        traffic_check_table(p), schedule_table(p), _printed_plan(p, others),
    ]  # fmt: skip
    return subsection(item.path.name, *parts, id_=item.anchor)


# --------------------------------------------------------------------------- surge


def surge_part(item: Item, a: SurgeArtifact) -> Html:
    runs = table(
        ["rate", "duration", "arrivals", "shed (model)", "P(reach Q_max) model",
         "p95 / p99 TTFAB from intended send", "p95 from actual send", "max send lag",
         "served rps", "ladder X at occupancy", "occupancy mean / max", "closed-loop p95"],
        [
            [number(r.rate_rps, "g", "rps"), number(r.duration_s, "g", "s"), r.arrivals,
             f"{r.shed_share:.1%} ({r.prediction.shed_share:.1%})",
             f"{r.prediction.reach_probability:.1%}",
             f"{number(r.ttfab_p95_ms, '.0f')} / {number(r.ttfab_p99_ms, '.0f')} ms",
             number(r.send_ttfab_p95_ms, ".0f", "ms"), number(r.max_send_lag_ms, ".0f", "ms"),
             number(r.served_rps, ".3g"), number(r.ladder_rps_at_occupancy, ".3g"),
             f"{r.mean_occupancy:.2f} / {r.max_occupancy}",
             number(r.closed_loop_ttfab_p95_ms, ".0f", "ms")]
            for r in a.runs
        ],
        "Open-loop runs against one instance bounded at Q_max, beside the birth–death model",
    )  # fmt: skip
    summary = [("admission bound Q_max", a.q_max), ("ladder", a.qmax_path)]
    return subsection(
        item.path.name, key_values(summary), _plot(item, "Surge occupancy"), runs, id_=item.anchor
    )


# --------------------------------------------------------------------------- simulation


def simulation_part(item: Item, a: SimulationArtifact) -> Html:
    i = a.inputs
    summary = [
        ("traffic", i.traffic),
        ("duration", number(i.duration_s, "g", "s")),
        ("seed", i.seed),
        ("model", i.model),
        ("plan id", i.plan_id),
        ("price per instance-hour", number(i.price_per_hour_usd, "g", "USD")),
        ("over the SLO when", i.over_slo_rule),
    ]
    oracle = a.oracle_instance_hours
    policies = table(
        ["policy", "requests", "shed", "over the SLO", "instance-hours", "× oracle", "cost",
         "peak instances"],
        [
            [p.policy, f"{p.requests:,}", f"{p.shed:,} ({100 * p.shed_share:.4f} %)",
             f"{p.over_slo:,} ({100 * p.over_slo_share:.4f} %)", number(p.instance_hours, ",.1f"),
             number(p.instance_hours / oracle if oracle else None, ".3f"),
             number(p.cost_usd, ",.0f", "USD"), p.peak_instances]
            for p in a.policies
        ],
        "Policies side by side on the same traffic"
        + (f" (the clairvoyant fleet: {oracle:,.1f} instance-hours)" if oracle else ""),
    )  # fmt: skip
    return subsection(
        item.path.name, key_values(summary), _plot(item, "Simulated timeline"), policies,
        id_=item.anchor,
    )  # fmt: skip


# --------------------------------------------------------------------------- rehearsal


def _passed(passed: bool) -> tuple[str, str]:
    return ("agrees", "ok") if passed else ("DISAGREES", "warn")


def _seconds(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values) + " s" if values else "-"


def rehearsal_part(item: Item, a: RehearsalArtifact) -> Html:
    i, agreement = a.inputs, a.agreement
    summary = [
        ("traffic", i.traffic),
        ("duration", number(i.duration_s, "g", "s")),
        ("seed, arrivals", f"{i.seed}, {i.arrivals:,}"),
        ("endpoint", f"{i.endpoint} / {i.variant}"),
        ("plan", f"{i.plan_id} ({i.plan_rule} rule)"),
        ("rate scale S, time scale K", f"{i.rate_scale:g}, {i.time_scale:g}"),
        ("instances min / max / at start", f"{i.min_instances} / {i.max_instances} / "
                                           f"{i.initial_instances}"),
        ("replays", i.replays),
        ("scaled out before shedding", yes_no(agreement.scaled_out_before_shedding)),
    ]  # fmt: skip
    runs = [("rehearsed", a.rehearsed.totals), ("simulated", a.simulated.totals)]
    totals = table(
        ["run", "requests", "shed", "errors", "instance-hours", "peak desired"],
        [
            [name, f"{t.requests:,}", f"{t.shed:,} ({100 * t.shed_share:.4f} %)", f"{t.errors:,}",
             number(t.instance_hours, ",.2f"), t.peak_desired]
            for name, t in runs
        ],
        "The rehearsed run and its replay on the same arrivals",
    )  # fmt: skip
    d, shed = agreement.desired, agreement.shed
    agreeing = table(
        ["figure", "rehearsed", "replays", "rule", "verdict"],
        [
            ["desired count", f"{d.agreeing} of {d.minutes} minutes ({d.share:.1%}) as the "
             f"primary replay{_in_band(d)}",
             f"agrees with {d.replays_share:.1%} of the replays; each replay with the others: "
             f"5 % quantile {d.replay_quantile:.1%}",
             (f"within max(1, 10 %), shift ≤ {d.shift_s:g} s, {d.required:.0%} of minutes"
              if d.verdict == "pairwise"
              else f"inside the replays' band on {d.required:.0%} of minutes"),
             _passed(d.passed)],
            ["shed share", f"{100 * shed.rehearsed:.4f} %",
             f"mean {100 * shed.simulated_mean:.4f} %, sd {100 * shed.simulated_sd:.4f} %"
             + (f"; 5–95 % {100 * (shed.replays_low or 0):.4f}–"
                f"{100 * (shed.replays_high or 0):.4f} %" if shed.verdict == "range" else ""),
             (f"within {100 * shed.tolerance:.4f} % of the mean" if shed.verdict == "spread"
              else "inside the replays' 5–95 % range, ± one request"),
             _passed(shed.passed)],
        ],
        "Agreement: the rehearsal judged as one more replay",
    )  # fmt: skip
    lags = table(
        ["alarm role", "modelled", "rehearsed", "simulated"],
        [[lag.role, number(lag.modelled_s, ".0f", "s"), _seconds(lag.rehearsed_s),
          _seconds(lag.simulated_s)] for lag in agreement.lags],
        "Detection lags: first breaching datapoint's period to the scale-out",
    )  # fmt: skip
    return subsection(
        item.path.name, key_values(summary), _plot(item, "Rehearsal timelines"), totals,
        agreeing, lags, id_=item.anchor,
    )  # fmt: skip


def _in_band(d: DesiredAgreement) -> str:
    if d.within_replays is None:
        return ""  # written before the band was recorded
    return f"; inside the replays' band on {d.within_replays} of {len(d.band)} minutes"


# --------------------------------------------------------------------------- provenance


def _provenance_of(item: Item) -> dict[str, Any]:
    return item.artifact.provenance.model_dump(mode="json")


def _fingerprint_of(item: Item) -> dict[str, Any] | None:
    fp = item.artifact.fingerprint
    return None if fp is None else fp.model_dump(mode="json")


def _fingerprint_cells(fp: dict[str, Any] | None) -> list[Any]:
    """What was measured: a vendor's package and the contract (kokoro when none is named) too."""
    if fp is None:
        return ["no fingerprint", *["-"] * 6]
    env = ", ".join(f"{k}={v}" for k, v in (fp.get("performance_env") or {}).items()) or "-"
    contract = (fp.get("contract") or {}).get("name", OWN_CONTRACT)
    return [fp.get("model"), fp.get("instance_type"), (fp.get("image_digest"), "hash"),
            fp.get("model_package") or "-", contract, fp.get("transport"), env]  # fmt: skip


def _sources_of(item: Item) -> dict[str, tuple[str, str]]:
    """role → (path, sha256) of the files this artifact says it was made from."""
    a = item.artifact
    if isinstance(a, PlanArtifact):
        return {role: (s.path, s.sha256) for role, s in a.sources.items()}
    if isinstance(a, SimulationArtifact | RehearsalArtifact):
        return {role: (f.path, f.sha256) for role, f in a.inputs.files.items()}
    if isinstance(a, SurgeArtifact):
        return {"qmax": (a.qmax_path, a.qmax_sha256)}
    if isinstance(a, TtotalArtifact) and a.qmax_sha256:
        return {"qmax": ("(judged recovery by)", a.qmax_sha256)}
    return {}


def provenance_section(items: Sequence[Item]) -> Html:
    files = table(
        ["file", "artifact", "sha256", "provenance", "created", "source", "tool", "command",
         "notes"],
        [
            [item.path.name, item.kind, (item.sha256, "hash"), prov.get("kind", "-")
             + (" (curve-modelled)" if prov.get("curve_modelled") else ""),
             prov.get("created_at", "-"), prov.get("source", "-"), prov.get("tool", "-"),
             prov.get("command") or "-", prov.get("notes") or "-"]
            for item in items
            for prov in [_provenance_of(item)]
        ],
        "Files",
    )  # fmt: skip
    prints = table(
        ["file", "model", "instance type", "image digest", "model package", "contract",
         "transport", "performance env"],
        [[item.path.name, *_fingerprint_cells(_fingerprint_of(item))] for item in items],
        "Fingerprints",
    )  # fmt: skip
    by_hash = {item.sha256: item.path.name for item in items}
    pairs = [
        [item.path.name, role, path, (sha, "hash"),
         (f"yes: {by_hash[sha]}", "ok") if sha in by_hash else ("not among these files", "warn")]
        for item in items
        for role, (path, sha) in _sources_of(item).items()
    ]  # fmt: skip
    headers = ["file", "made from", "path it names", "sha256", "among these files"]
    sources = table(headers, pairs, "What each artifact was made from") if pairs else Html("")
    return join([files, prints, sources])


# The sections in page order: (anchor, title, the artifact kinds shown there).
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("ladder", "Ladder: Q_max", ("qmax",)),
    ("ttotal", "T_total: scale-out stages", ("ttotal",)),
    ("plan", "Plan: deployed numbers, derivation, findings", ("plan",)),
    ("surge", "Surge check", ("surge",)),
    ("simulation", "Simulation", ("simulation",)),
    ("rehearsal", "Rehearsal", ("rehearsal",)),
)


def part(item: Item, items: Sequence[Item]) -> Html:
    """One artifact's article (`items`: every file of the report, where a plan finds its
    sources)."""
    a = item.artifact
    if isinstance(a, QmaxArtifact):
        return ladder_part(item, a)
    if isinstance(a, TtotalArtifact):
        return ttotal_part(item, a)
    if isinstance(a, PlanArtifact):
        return plan_part(item, a, items)
    if isinstance(a, SurgeArtifact):
        return surge_part(item, a)
    if isinstance(a, SimulationArtifact):
        return simulation_part(item, a)
    return rehearsal_part(item, a)
