"""Small builders for ladders and scale-outs, so tests state only the figures they care about."""

from __future__ import annotations

from collections.abc import Sequence

from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.plan import SourceArtifact
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import (
    QmaxArtifact,
    QmaxBasis,
    ladder_outcome,
    q_max_interval_of,
    q_max_on_basis,
)
from tts_bench.artifacts.rungs import (
    LadderSettings,
    P95Interval,
    Rung,
    UncontendedService,
    rung_verdict,
)
from tts_bench.artifacts.ttotal import Stage, Trigger, TtotalArtifact

DIGEST = "sha256:" + "ab" * 32
FINGERPRINT = Fingerprint(
    model="kokoro-82m",
    instance_type="ml.g5.xlarge",
    image_digest=DIGEST,
    transport=Transport.LOCAL_HTTP,
)
SOURCES = {
    "qmax": SourceArtifact(path="q.json", sha256="0" * 64, provenance="simulated"),
    "ttotal": SourceArtifact(path="t.json", sha256="1" * 64, provenance="simulated"),
}


def rung(
    concurrency: int,
    rps: float,
    ttfab_p95_ms: float,
    *,
    slo_ms: float = 3000,
    latency_p95_ms: float | None = None,
    cw: float | None = None,
    usable: bool = True,
    interval: tuple[float | None, float | None, float] | None = None,
) -> Rung:
    """`interval`: the p95's (lower, upper, level), which sets the rung's verdict too."""
    judged = {}
    if interval is not None:
        lower, upper, level = interval
        judged = {
            "ttfab_p95_interval": P95Interval(
                level=level, samples=100, effective_samples=100.0, lower_ms=lower, upper_ms=upper
            ),
            "verdict": rung_verdict(lower, upper, 0, 100, slo_ms),
        }
    latency_p95 = latency_p95_ms if latency_p95_ms is not None else ttfab_p95_ms * 1.02
    return Rung(
        concurrency=concurrency,
        achieved_rps=rps,
        ttfab_p50_ms=ttfab_p95_ms * 0.95,
        ttfab_p95_ms=ttfab_p95_ms,
        ttfab_p99_ms=ttfab_p95_ms * 1.01,
        latency_mean_ms=latency_p95 * 0.97,
        latency_p95_ms=latency_p95,
        completed=100,
        ok=100,
        rejected=0,
        errors=0,
        client_mean_in_flight=float(concurrency),
        cloudwatch_ratio=cw,
        meets_slo=ttfab_p95_ms <= slo_ms,
        usable=usable,
        unusable_reason=None if usable else "client-bound: mean in-flight below 95 % of N",
        **judged,
    )


def qmax_artifact(
    rungs: Sequence[Rung],
    *,
    slo_ms: float = 3000,
    fingerprint: Fingerprint | None = FINGERPRINT,
    confidence: float | None = None,
    q_max_basis: QmaxBasis | None = None,
) -> QmaxArtifact:
    """With `confidence`, the rungs carry intervals at it (`rung(interval=…)`), and so does Q_max;
    `q_max_basis` (with a confidence) says which Q_max the artifact's is."""
    _, bracketed = ladder_outcome(list(rungs))
    interval = q_max_interval_of(list(rungs), confidence) if confidence else None
    ladder = None
    if confidence is not None:
        levels = [r.concurrency for r in rungs]
        ladder = LadderSettings(
            rungs=levels, hold_s=240, measure_s=60, idle_s=30, confidence=confidence
        )
    c1 = next((r for r in rungs if r.concurrency == 1), None)
    return QmaxArtifact(
        fingerprint=fingerprint,
        slo_ms=slo_ms,
        q_max=q_max_on_basis(q_max_basis, list(rungs), interval, None),
        q_max_basis=q_max_basis,
        bracketed=bracketed,
        uncontended_service_s=(
            UncontendedService(mean=c1.latency_mean_ms / 1000, p95=c1.latency_p95_ms / 1000)
            if c1 and c1.latency_mean_ms and c1.latency_p95_ms
            else None
        ),
        rungs=list(rungs),
        ladder=ladder,
        q_max_interval=interval,
        provenance=Provenance.now("simulated", source="tests"),
    )


def ttotal_artifact(
    measured_total_s: float = 120.0,
    lag_s: float = 60.0,
    *,
    fingerprint: Fingerprint | None = FINGERPRINT,
) -> TtotalArtifact:
    return TtotalArtifact(
        fingerprint=fingerprint,
        trigger=Trigger.LOCAL_PROCESS,
        stages=[
            Stage(name="load_applied -> desired_set", seconds=5.0, measured=True, counted=False),
            Stage(
                name="desired_set -> ready", seconds=measured_total_s, measured=True, counted=True
            ),
        ],
        measured_total_s=measured_total_s,
        policy_lag_bound_s=lag_s,
        planned_total_s=measured_total_s + lag_s,
        provenance=Provenance.now("simulated", source="tests"),
    )


def serial_ladder(
    levels: Sequence[int] = (1, 5, 10, 20, 30, 40),
    service_ms: float = 100.0,
    slo_ms: float = 3000,
    cw: float | None = None,
) -> list[Rung]:
    """A one-at-a-time server: flat throughput, latency growing linearly with N."""
    return [rung(n, 1000 / service_ms, service_ms * n, slo_ms=slo_ms, cw=cw) for n in levels]
