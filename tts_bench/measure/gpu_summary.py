"""The serial-against-batched GPU summary, computed from two qmax artifacts and an offline sweep.

`benchmarks/gpu_bench.py` measures; this module only does the arithmetic, so a test can
recompute the committed summary from the committed artifacts. Served audio-seconds per
second at Q_max is the achieved request rate there times the corpus's mean audio length per
utterance (users walk the corpus uniformly; the mean comes from the same model's durations).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.errors import TtsBenchError

SUMMARY_KIND = "gpu-summary"


class GpuSummaryError(TtsBenchError):
    """The artifacts cannot be compared (no rung at c=1, modes swapped, different SLO)."""


class OfflineSweep(BaseModel):
    """Audio-seconds per second of the bare model at each batch size (no serving overhead)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: str
    audio_s_per_s_by_batch: dict[int, float] = Field(min_length=1)
    corpus_mean_audio_s: float = Field(gt=0, description="mean audio per corpus utterance")

    @property
    def best(self) -> float:
        return max(self.audio_s_per_s_by_batch.values())


class Parity(BaseModel):
    """The shipped pass against float32 eager on every corpus segment (gpu_bench `_parity`)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    durations_equal: bool
    log_mel_db_mean: float | None
    f0_r_mean: float | None


class EngineFacts(BaseModel):
    """What one device run measured beside the ladders: engines' offline segments per second
    (the new build and the wave-1 baseline, same corpus, same run), parity, start-up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    segments_per_s_by_batch: dict[int, float] = Field(min_length=1)
    baseline_segments_per_s_by_batch: dict[int, float] = Field(min_length=1)
    parity: Parity
    compile_warmup_s: float = Field(ge=0)
    # None where the run timed only some starts of this design (run 6: the in-process design
    # started warm only; eager and cold were timed for the design the build ships).
    ready_s_eager: float | None = Field(default=None, gt=0)
    ready_s_cold_cache: float | None = Field(default=None, gt=0)
    ready_s_warm_cache: float | None = Field(default=None, gt=0)


def q_max_resolution(artifact: QmaxArtifact) -> float | None:
    """(first failing rung - Q_max) / Q_max: how finely the ladder pinned Q_max down."""
    fails = [r.concurrency for r in artifact.rungs if not r.passes]
    q_max = artifact.coarse_q_max
    if q_max is None or not fails:
        return None
    above = [c for c in fails if c > q_max]
    return None if not above else round((min(above) - q_max) / q_max, 4)


def _facts_keys(
    facts: EngineFacts, serial: QmaxArtifact, batched: QmaxArtifact
) -> dict[str, object]:
    new, old = facts.segments_per_s_by_batch, facts.baseline_segments_per_s_by_batch
    return {
        "offline_segments_per_s": {str(k): v for k, v in sorted(new.items())},
        "offline_segments_per_s_baseline": {str(k): v for k, v in sorted(old.items())},
        "offline_speedup_by_batch": {
            str(k): _ratio(new[k], old[k]) for k in sorted(new) if k in old
        },
        "parity": facts.parity.model_dump(),
        "compile_warmup_s": facts.compile_warmup_s,
        "ready_s_eager": facts.ready_s_eager,
        "ready_s_cold_cache": facts.ready_s_cold_cache,
        "ready_s_warm_cache": facts.ready_s_warm_cache,
        "q_max_resolution": {
            "serial": q_max_resolution(serial),
            "batched": q_max_resolution(batched),
        },
    }


def _rate_at_qmax(artifact: QmaxArtifact) -> float | None:
    if artifact.coarse_q_max is None:
        return None
    rung = artifact.rung(artifact.coarse_q_max)
    return None if rung is None else rung.achieved_rps


def _ttfab_p95_c1(artifact: QmaxArtifact, mode: str) -> float | None:
    rung = artifact.rung(1)
    if rung is None:
        raise GpuSummaryError(f"the {mode} ladder has no rung at c=1; include 1 in --rungs")
    return rung.ttfab_p95_ms


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b in (None, 0) else round(a / b, 3)  # type: ignore[operator]


def gpu_summary(
    serial: QmaxArtifact,
    batched: QmaxArtifact,
    offline: OfflineSweep,
    weights: str,
    command: str,
    notes: Mapping[str, str] | None = None,
    facts: EngineFacts | None = None,
) -> dict[str, object]:
    """The summary object written to `measurements/gpu-summary-<gpu>.json`.

    `facts` (runs from the fused-engine issue on) adds the engines' offline segments per
    second, parity, start-up times and how finely each Q_max was bracketed.
    """
    if serial.slo_ms != batched.slo_ms:
        raise GpuSummaryError(f"SLOs differ: serial {serial.slo_ms} ms, batched {batched.slo_ms}")
    modes = [
        a.fingerprint.performance_env.get("ENGINE_MODE") if a.fingerprint else None
        for a in (serial, batched)
    ]
    if modes[0] != "serial" or modes[1] == "serial":
        raise GpuSummaryError(f"expected a serial then a batching artifact, got modes {modes}")
    rps_serial, rps_batched = _rate_at_qmax(serial), _rate_at_qmax(batched)
    served = None if rps_batched is None else rps_batched * offline.corpus_mean_audio_s
    served_serial = None if rps_serial is None else rps_serial * offline.corpus_mean_audio_s
    c1_serial = _ttfab_p95_c1(serial, "serial")
    c1_batched = _ttfab_p95_c1(batched, "batched")
    return {
        "summary": SUMMARY_KIND,
        "slo_ms": serial.slo_ms,
        "instance_type": batched.fingerprint.instance_type if batched.fingerprint else None,
        "weights": weights,
        "dtype": offline.dtype,
        "q_max_serial": serial.q_max,
        "q_max_batched": batched.q_max,
        "q_max_ratio": _ratio(batched.q_max, serial.q_max),
        "bracketed_serial": serial.bracketed,
        "bracketed_batched": batched.bracketed,
        "throughput_at_qmax_serial_rps": rps_serial,
        "throughput_at_qmax_batched_rps": rps_batched,
        "throughput_ratio": _ratio(rps_batched, rps_serial),
        "ttfab_p95_c1_serial_ms": c1_serial,
        "ttfab_p95_c1_batched_ms": c1_batched,
        "offline_limit_audio_s_per_s": offline.best,
        "offline_audio_s_per_s_by_batch": {
            str(k): v for k, v in sorted(offline.audio_s_per_s_by_batch.items())
        },
        "corpus_mean_audio_s": offline.corpus_mean_audio_s,
        "served_audio_s_per_s_at_qmax_serial": served_serial,
        "served_audio_s_per_s_at_qmax_batched": served,
        "share_of_offline_limit_batched": _ratio(served, offline.best),
        "share_of_offline_limit_serial": _ratio(served_serial, offline.best),
        "command": command,
        "notes": dict(notes or {}),
        **({} if facts is None else _facts_keys(facts, serial, batched)),
    }


def recompute(
    summary: Mapping[str, object], serial: QmaxArtifact, batched: QmaxArtifact
) -> dict[str, object]:
    """The summary again from the artifacts and the offline figures the summary recorded."""
    by_batch = summary["offline_audio_s_per_s_by_batch"]
    offline = OfflineSweep(
        dtype=str(summary["dtype"]),
        audio_s_per_s_by_batch={int(k): float(v) for k, v in dict(by_batch).items()},  # type: ignore[call-overload]
        corpus_mean_audio_s=float(summary["corpus_mean_audio_s"]),  # type: ignore[arg-type]
    )
    facts = None
    if "offline_segments_per_s" in summary:
        facts = EngineFacts(
            segments_per_s_by_batch=summary["offline_segments_per_s"],  # type: ignore[arg-type]
            baseline_segments_per_s_by_batch=summary["offline_segments_per_s_baseline"],  # type: ignore[arg-type]
            parity=Parity.model_validate(summary["parity"]),
            compile_warmup_s=summary["compile_warmup_s"],  # type: ignore[arg-type]
            ready_s_eager=summary["ready_s_eager"],  # type: ignore[arg-type]
            ready_s_cold_cache=summary["ready_s_cold_cache"],  # type: ignore[arg-type]
            ready_s_warm_cache=summary["ready_s_warm_cache"],  # type: ignore[arg-type]
        )
    return gpu_summary(
        serial,
        batched,
        offline,
        str(summary["weights"]),
        str(summary["command"]),
        summary.get("notes"),  # type: ignore[arg-type]
        facts,
    )
