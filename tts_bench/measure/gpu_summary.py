"""The serial-against-batched GPU summary, computed from two qmax artifacts and an offline sweep.

`benchmarks/gpu_bench.py` measures; this module only does the arithmetic, so a test can
recompute the committed summary from the committed artifacts. Served audio-seconds per
second at Q_max is the achieved request rate there times the corpus's mean audio length per
utterance (users walk the corpus uniformly; the mean comes from the same model's durations).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from tts_bench.artifacts.schema import QmaxArtifact
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


def _rate_at_qmax(artifact: QmaxArtifact) -> float | None:
    if artifact.q_max is None:
        return None
    rung = artifact.rung(artifact.q_max)
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
) -> dict[str, object]:
    """The summary object written to `measurements/gpu-summary-<gpu>.json`."""
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
    return gpu_summary(
        serial,
        batched,
        offline,
        str(summary["weights"]),
        str(summary["command"]),
        summary.get("notes"),  # type: ignore[arg-type]
    )
