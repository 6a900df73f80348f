"""The three measurement artifacts (qmax, ttotal, plan): schemas, loading and atomic writes.

Every artifact is JSON validated by a pydantic model with ``extra="forbid"``, carries its
provenance and fingerprint, and is named after the fingerprint's slug (see `fingerprint`).
Loading a broken file raises `ArtifactError` with one line naming the file and the field;
writing never overwrites an artifact of another fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from tts_bench import __version__
from tts_bench.artifacts.atomic_file import write_atomically
from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.errors import ArtifactError

SCHEMA_VERSION = 1

# Counted stages are each rounded for storage; their sum may drift from the total by this much
# per stage (the published run's stages sum to 260.1 s against a 260.2 s total).
STAGE_ROUNDING_S = 0.05

__all__ = [
    "SCHEMA_VERSION",
    "Finding",
    "Fingerprint",
    "PlanArtifact",
    "PlanInputs",
    "Provenance",
    "ProvenanceKind",
    "QmaxArtifact",
    "Rung",
    "SourceArtifact",
    "Stage",
    "Transport",
    "Trigger",
    "TtotalArtifact",
    "UncontendedService",
    "Verdict",
    "load_artifact",
    "sha256_file",
    "write_artifact",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ProvenanceKind = Literal["measured", "reference", "simulated", "emulated"]


class Provenance(_Strict):
    """Where an artifact came from: measured live, rebuilt from a reference, simulated, or
    emulated (measured through the local cloud: real clients and containers, no real AWS)."""

    kind: ProvenanceKind
    created_at: datetime
    source: str = Field(min_length=1, description="what was measured: endpoint, host or file")
    tool: str = f"tts-bench {__version__}"
    command: str | None = None
    notes: str | None = None

    @classmethod
    def now(cls, kind: ProvenanceKind, source: str, **kw: Any):
        return cls(
            kind=kind, created_at=datetime.now(UTC).replace(microsecond=0), source=source, **kw
        )


# --------------------------------------------------------------------------- qmax


class UncontendedService(_Strict):
    """End-to-end latency at the c=1 rung, seconds (S and S_p95 of SPEC §6)."""

    mean: PositiveFloat
    p95: PositiveFloat


class LadderSettings(_Strict):
    """The schedule: rung i holds from start + i·(hold_s + idle_s) for hold_s, measured over
    its trailing measure_s."""

    rungs: list[PositiveInt]
    hold_s: PositiveFloat
    measure_s: PositiveFloat
    idle_s: NonNegativeFloat
    start_epoch: float | None = Field(
        default=None, description="unix time the first rung began, the raw samples' clock"
    )

    def measure_window(self, index: int) -> tuple[float, float]:
        """Rung `index`'s measure window in unix time (needs `start_epoch`)."""
        if self.start_epoch is None:
            raise ValueError("this ladder did not record when it started")
        hold_end = self.start_epoch + index * (self.hold_s + self.idle_s) + self.hold_s
        return hold_end - self.measure_s, hold_end


class Rung(_Strict):
    """One step of the closed-loop ladder, computed from raw samples in its measure window."""

    concurrency: PositiveInt
    achieved_rps: NonNegativeFloat
    # Percentiles are null only when the window holds no successful request.
    ttfab_p50_ms: NonNegativeFloat | None
    ttfab_p95_ms: NonNegativeFloat | None
    ttfab_p99_ms: NonNegativeFloat | None
    latency_mean_ms: NonNegativeFloat | None
    latency_p95_ms: NonNegativeFloat | None
    completed: NonNegativeInt
    ok: NonNegativeInt
    rejected: NonNegativeInt
    errors: NonNegativeInt
    client_mean_in_flight: NonNegativeFloat
    cloudwatch_ratio: PositiveFloat | None = Field(
        description="CloudWatch ConcurrentRequestsPerModel Maximum / client mean; null when not measured"
    )
    meets_slo: bool
    usable: bool
    unusable_reason: str | None = None
    client_cpu_percent: NonNegativeFloat | None = None
    # Server-side FirstChunkLatency p95 (queue wait excluded); a batching engine's alarm uses it.
    server_first_chunk_p95_ms: NonNegativeFloat | None = None

    @property
    def passes(self) -> bool:
        return self.usable and self.meets_slo

    @model_validator(mode="after")
    def _consistent(self) -> Rung:
        if self.ok > self.completed:
            raise ValueError(f"ok ({self.ok}) exceeds completed ({self.completed})")
        if not self.usable and not self.unusable_reason:
            raise ValueError("an unusable rung needs unusable_reason")
        return self


def ladder_outcome(rungs: list[Rung]) -> tuple[int | None, bool]:
    """(Q_max, bracketed): the highest passing rung below the first failure.

    A rung that meets the SLO but is unusable (client-bound) is no pass: the ladder cannot
    vouch for anything at or above it, so it ends the ladder unbracketed.
    """
    q_max: int | None = None
    for rung in rungs:
        if not rung.usable:
            return q_max, False
        if not rung.meets_slo:
            return q_max, True
        q_max = rung.concurrency
    return q_max, False


class QmaxArtifact(_Strict):
    artifact: Literal["qmax"] = "qmax"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    slo_ms: PositiveFloat
    q_max: PositiveInt | None = Field(description="highest passing rung; null when c=1 fails")
    bracketed: bool = Field(description="a higher rung was measured and failed")
    uncontended_service_s: UncontendedService | None
    rungs: list[Rung] = Field(min_length=1)
    ladder: LadderSettings | None = None
    provenance: Provenance

    @field_validator("rungs")
    @classmethod
    def _ascending(cls, rungs: list[Rung]) -> list[Rung]:
        levels = [r.concurrency for r in rungs]
        if levels != sorted(set(levels)):
            raise ValueError(f"rung concurrencies must be strictly ascending, got {levels}")
        return rungs

    @model_validator(mode="after")
    def _outcome_matches_rungs(self) -> QmaxArtifact:
        q_max, bracketed = ladder_outcome(self.rungs)
        if (self.q_max, self.bracketed) != (q_max, bracketed):
            raise ValueError(
                f"q_max={self.q_max}, bracketed={self.bracketed} disagree with the rungs "
                f"(which give q_max={q_max}, bracketed={bracketed})"
            )
        return self

    def rung(self, concurrency: int) -> Rung | None:
        return next((r for r in self.rungs if r.concurrency == concurrency), None)


# --------------------------------------------------------------------------- ttotal


class Trigger(StrEnum):
    FORCE_DESIRED = "force-desired"  # UpdateEndpointWeightsAndCapacities +1, policy bypassed
    LOCAL_PROCESS = "local-process"  # a fresh server process started beside a loaded one


class Stage(_Strict):
    """One timed stage of a scale-out, from its own source of timestamps."""

    name: str = Field(min_length=1, description="'<from marker> -> <to marker>'")
    seconds: NonNegativeFloat
    measured: bool = Field(description="false when the figure is a bound, not a reading")
    reason: str | None = Field(default=None, description="why a bound stands in for a reading")
    counted: bool = Field(description="part of measured_total_s")

    @model_validator(mode="after")
    def _bound_has_reason(self) -> Stage:
        if not self.measured and not self.reason:
            raise ValueError(f"stage {self.name!r} is a bound (measured=false) and needs a reason")
        return self


class TtotalArtifact(_Strict):
    artifact: Literal["ttotal"] = "ttotal"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    trigger: Trigger
    stages: list[Stage] = Field(min_length=1)
    measured_total_s: PositiveFloat
    policy_lag_bound_s: NonNegativeFloat = Field(
        description="metric period × evaluation periods + scale-out cooldown; not a stage"
    )
    planned_total_s: PositiveFloat
    recovery_rule: str | None = None
    qmax_sha256: str | None = Field(default=None, description="the ladder recovery was judged by")
    provenance: Provenance

    @model_validator(mode="after")
    def _totals_add_up(self) -> TtotalArtifact:
        counted = [s for s in self.stages if s.counted]
        total = sum(s.seconds for s in counted)
        if abs(total - self.measured_total_s) > STAGE_ROUNDING_S * len(counted) + 1e-9:
            raise ValueError(
                f"counted stages sum to {total:.3f} s but measured_total_s is "
                f"{self.measured_total_s:.3f} s"
            )
        expected = self.measured_total_s + self.policy_lag_bound_s
        if abs(self.planned_total_s - expected) > 1e-6:
            raise ValueError(
                f"planned_total_s {self.planned_total_s} != measured_total_s + policy_lag_bound_s "
                f"({expected:.3f})"
            )
        return self


# --------------------------------------------------------------------------- plan


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    STOP = "stop"

    @property
    def severity(self) -> int:
        return {"ok": 0, "warn": 1, "stop": 2}[self.value]


FigureValue = float | int | bool | str | None


class Finding(BaseModel):
    """A named check with a verdict; its figures sit beside `message` as extra keys."""

    model_config = ConfigDict(extra="allow")

    name: str
    verdict: Verdict
    message: str

    @model_validator(mode="after")
    def _figures_are_scalars(self) -> Finding:
        for key, value in (self.model_extra or {}).items():
            if not isinstance(value, FigureValue):  # type: ignore[arg-type]
                raise ValueError(f"figure {key!r} must be a number, bool, string or null")
        return self

    def figure(self, key: str) -> Any:
        return (self.model_extra or {})[key]


class SourceArtifact(_Strict):
    path: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    provenance: ProvenanceKind


class PlanInputs(_Strict):
    slo_ms: PositiveFloat
    surge_ratio: float
    peak_rps: NonNegativeFloat
    trough_rps: NonNegativeFloat
    min_floor: PositiveInt
    allow_config_mismatch: bool
    q_max: PositiveInt
    service_mean_s: PositiveFloat
    service_p95_s: PositiveFloat
    ttfab_p95_c1_ms: NonNegativeFloat
    planned_total_s: PositiveFloat


class PlanArtifact(_Strict):
    artifact: Literal["plan"] = "plan"
    schema_version: Literal[1] = SCHEMA_VERSION
    plan_id: str = Field(pattern=r"^[0-9a-f]{12}$", description="hash of inputs and sources")
    feasible: bool
    fingerprint: Fingerprint | None
    c_scale_max: PositiveFloat
    c_scale_min: NonNegativeFloat
    scaling_target_value: PositiveFloat
    scale_in_threshold: NonNegativeFloat
    w_max_s: float
    scale_out_cooldown_s: PositiveInt
    scale_in_cooldown_s: PositiveInt
    queue_max_depth: PositiveInt
    first_chunk_alarm_ms: NonNegativeInt
    alarm_rule: Literal["ttfab-p95-c1", "server-first-chunk-p95-at-trigger"]
    min_instances: PositiveInt
    max_instances: PositiveInt
    findings: list[Finding]
    inputs: PlanInputs
    sources: dict[Literal["qmax", "ttotal"], SourceArtifact]
    provenance: Provenance

    @model_validator(mode="after")
    def _consistent(self) -> PlanArtifact:
        worst = [f.verdict.severity for f in self.findings]
        if worst != sorted(worst, reverse=True):
            raise ValueError("findings must be ordered worst first")
        if self.feasible == any(f.verdict is Verdict.STOP for f in self.findings):
            raise ValueError("feasible must be true exactly when no finding is 'stop'")
        if self.max_instances < self.min_instances:
            raise ValueError("max_instances is below min_instances")
        return self

    def finding(self, name: str) -> Finding | None:
        return next((f for f in self.findings if f.name == name), None)


# --------------------------------------------------------------------------- files

A = TypeVar("A", QmaxArtifact, TtotalArtifact, PlanArtifact)
ARTIFACT_MODELS: dict[str, type[BaseModel]] = {
    "qmax": QmaxArtifact,
    "ttotal": TtotalArtifact,
    "plan": PlanArtifact,
}


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    more = error.error_count() - 1
    return f"{loc}: {msg}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def load_artifact(path: str | os.PathLike[str], model: type[A]) -> A:
    """Read and validate one artifact; any problem is an `ArtifactError` of one line."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read: {exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ArtifactError(
            f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    kind = model.model_fields["artifact"].default
    if isinstance(data, dict) and data.get("artifact") not in (None, kind):
        raise ArtifactError(
            f"{path}: artifact: this is a {data['artifact']!r} artifact, expected {kind!r}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ArtifactError(f"{path}: {_describe(exc)}") from None


def load_any(path: str | os.PathLike[str]) -> QmaxArtifact | TtotalArtifact | PlanArtifact:
    """Load an artifact of whichever kind its `artifact` key names."""
    path = Path(path)
    try:
        kind = json.loads(path.read_text(encoding="utf-8")).get("artifact")
    except (OSError, ValueError, AttributeError):
        kind = None
    if kind not in ARTIFACT_MODELS:
        # Let the qmax loader produce the precise one-line complaint.
        kind = kind if kind in ARTIFACT_MODELS else "qmax"
    return load_artifact(path, ARTIFACT_MODELS[kind])  # type: ignore[type-var]


def dump_json(artifact: BaseModel) -> str:
    return artifact.model_dump_json(indent=2) + "\n"


def write_artifact(artifact: A, directory: str | os.PathLike[str], filename: str) -> Path:
    """Atomically write `artifact` as `directory/filename`.

    Overwrites an earlier artifact of the same fingerprint (a re-run); refuses to replace one
    of another fingerprint, or a file it cannot read, so nothing measured is ever lost.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / filename
    if target.exists():
        try:
            existing = load_artifact(target, type(artifact))
        except ArtifactError as exc:
            raise ArtifactError(
                f"{target}: exists and cannot be read back ({exc}); move it aside, nothing was written"
            ) from None
        if _is_emulated(artifact) != _is_emulated(existing):
            raise ArtifactError(
                f"{target}: holds a {existing.provenance.kind} artifact and this one is "
                f"{artifact.provenance.kind}; they never replace each other, nothing was written"
            )
        if existing.fingerprint != artifact.fingerprint:
            raise ArtifactError(
                f"{target}: holds an artifact of another fingerprint; pass another --out "
                "directory or move it aside, nothing was written"
            )
    write_atomically(target, dump_json(artifact).encode("utf-8"))
    return target


def _is_emulated(artifact: QmaxArtifact | TtotalArtifact | PlanArtifact) -> bool:
    return artifact.provenance.kind == "emulated"


def sha256_file(path: str | os.PathLike[str]) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
