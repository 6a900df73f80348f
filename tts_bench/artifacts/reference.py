"""Rebuild the qmax and ttotal artifacts of the one public measurement run from its figures.

The published run (`shared/reference/published-g5xlarge-run.json`) is a table of numbers, not
our format; this turns it into artifacts with provenance `reference`, so `plan` and `report`
treat it like any other measurement and the reference check of SPEC §6 can be reproduced.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError

from tts_bench.artifacts.files import parse_artifact_json
from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact, ladder_outcome
from tts_bench.artifacts.rungs import LadderSettings, Rung, UncontendedService
from tts_bench.artifacts.ttotal import Stage, Trigger, TtotalArtifact
from tts_bench.errors import ArtifactError

# The committed reference artifacts (measurements/…-g5xlarge-8b1b96bc.json), by sha256. They
# hold no raw data, so these files are the only ones `tts-bench verify` and the plan gate accept
# as reference: a rebuild here carries a new created_at and is for reading, not for deploying.
PINNED_REFERENCE_SHA256: Final[dict[str, str]] = {
    "eaa03a6d2e7b9e300e39e1d3d53f2f3b08a384576f1686e05e66af286160c4c2": (
        "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
    ),
    "472dc9c2915456580be14b8b55945cd3990e1bbf0c3fe07fc2391f877edb2c84": (
        "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json"
    ),
}

# The published run itself, kept beside them (measurements/reference/), by sha256: an edited
# reference artifact is rebuilt from it to name the field that was changed.
PUBLISHED_RUN = "reference/published-g5xlarge-run.json"
PUBLISHED_RUN_SHA256: Final = "3e43d56e3040c4c15d4a691fe9c4ed86f296b4b354308ca931532221dc1693d2"

# The published stage labels, reduced to the marker pairs our own T_total records.
_MARKER_NAMES = {
    "instance visible in logs": "instance_visible",
    "instance visible": "instance_visible",
}


class _PublishedLadder(BaseModel):
    model_config = ConfigDict(extra="ignore")
    rungs: list[int]
    hold_s: float
    measure_window_s: float
    idle_between_rungs_s: float
    columns: list[str]
    rows: list[list[float]]
    q_max: int
    bracketed: bool
    uncontended_service_s: dict[str, float]


class _PublishedTtotal(BaseModel):
    model_config = ConfigDict(extra="ignore")
    trigger: str
    stages_s: list[tuple[str, float]]
    measured_total_s: float
    policy_detection_lag_bound_s: float
    planned_total_s: float
    recovery_rule: str


class _PublishedRun(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    instance_type: str
    image_digest: str
    transport: Transport
    slo_ms: float
    ladder: _PublishedLadder
    t_total: _PublishedTtotal


def _stage_name(label: str) -> str:
    """'desired_set -> instance visible in logs (EC2 …)' → 'desired_set -> instance_visible'."""
    head = label.split(" (", 1)[0]
    ends = [part.strip() for part in head.split("->")]
    return " -> ".join(_MARKER_NAMES.get(end, re.sub(r"\W+", "_", end)) for end in ends)


def build_reference(path: Path) -> tuple[QmaxArtifact, TtotalArtifact]:
    """Both artifacts from the published figures at `path`."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read: {exc}") from None
    try:
        run = _PublishedRun.model_validate(parse_artifact_json(raw, path))
    except (ValueError, ValidationError) as exc:
        raise ArtifactError(
            f"{path}: not a published-run file: {str(exc).splitlines()[0]}"
        ) from None

    fingerprint = Fingerprint(
        model=run.model,
        instance_type=run.instance_type,
        image_digest=run.image_digest,
        transport=run.transport,
    )
    provenance = Provenance.now(
        "reference",
        source=f"{path.name} (published ml.g5.xlarge run)",
        command=f"tts-bench import-reference {path.name}",
    )
    rungs = [
        _rung(dict(zip(run.ladder.columns, row, strict=True)), run.slo_ms)
        for row in run.ladder.rows
    ]
    q_max, bracketed = ladder_outcome(rungs)
    if (q_max, bracketed) != (run.ladder.q_max, run.ladder.bracketed):
        raise ArtifactError(
            f"{path}: the published q_max {run.ladder.q_max} disagrees with its own rows ({q_max})"
        )
    qmax = QmaxArtifact(
        fingerprint=fingerprint,
        slo_ms=run.slo_ms,
        q_max=q_max,
        bracketed=bracketed,
        uncontended_service_s=UncontendedService(**run.ladder.uncontended_service_s),
        rungs=rungs,
        ladder=LadderSettings(
            rungs=run.ladder.rungs,
            hold_s=run.ladder.hold_s,
            measure_s=run.ladder.measure_window_s,
            idle_s=run.ladder.idle_between_rungs_s,
        ),
        provenance=provenance,
    )
    # The first stage is the probe's warm-up before our own capacity call: recorded, not counted.
    stages = [
        Stage(name=_stage_name(label), seconds=seconds, measured=True, counted=index > 0)
        for index, (label, seconds) in enumerate(run.t_total.stages_s)
    ]
    ttotal = TtotalArtifact(
        fingerprint=fingerprint,
        trigger=Trigger.FORCE_DESIRED,
        stages=stages,
        measured_total_s=run.t_total.measured_total_s,
        policy_lag_bound_s=run.t_total.policy_detection_lag_bound_s,
        planned_total_s=run.t_total.planned_total_s,
        recovery_rule=run.t_total.recovery_rule,
        provenance=provenance,
    )
    return qmax, ttotal


def _rung(row: dict[str, Any], slo_ms: float) -> Rung:
    completed, ok = int(row["completed"]), int(row["ok"])
    return Rung(
        concurrency=int(row["concurrency"]),
        achieved_rps=row["achieved_rps"],
        ttfab_p50_ms=row["ttfab_p50_ms"],
        ttfab_p95_ms=row["ttfab_p95_ms"],
        ttfab_p99_ms=row["ttfab_p99_ms"],
        latency_mean_ms=row["latency_mean_ms"],
        latency_p95_ms=row["latency_p95_ms"],
        completed=completed,
        ok=ok,
        rejected=0,
        errors=completed - ok,
        client_mean_in_flight=row["client_mean_in_flight"],
        cloudwatch_ratio=row.get("cloudwatch_max_over_client_mean"),
        meets_slo=row["ttfab_p95_ms"] <= slo_ms,
        usable=True,
    )
