"""The live ladder on a SageMaker endpoint: preflight, freeze, Locust, CloudWatch join.

`run_live_ladder` is what `tts-bench qmax --endpoint` runs, from the CLI's main thread:
1. a preflight `drift` that refuses on any error (a leftover suspension, an orphan, ...);
2. `frozen_scaling` around the Locust run (scaling suspended, one instance pinned), restored
   on every exit path: a normal end, an exception, Ctrl-C, SIGTERM;
3. the fingerprint read from the endpoint itself (`sagemaker_target`), after the freeze;
4. per rung, `cloudwatch_ratio` from ConcurrentRequestsPerModel once CloudWatch has it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.schema import QmaxArtifact, load_artifact, write_artifact
from tts_bench.aws.drift import read_and_check
from tts_bench.aws.freeze import frozen_scaling
from tts_bench.aws.session import AwsSession
from tts_bench.errors import RefusalError
from tts_bench.measure.cloudwatch_join import DEFAULT_METRIC_WAIT_S, await_concurrency, ratios_for
from tts_bench.measure.ladder import LadderSchedule
from tts_bench.measure.ladder_locust import LadderRequest, run_ladder
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target

Log = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class LiveLadderRequest:
    endpoint: str
    variant: str
    transport: Transport
    schedule: LadderSchedule
    slo_ms: float
    model: str
    out: Path
    corpus: Path | None = None
    processes: int | None = None
    metric_wait_s: float = DEFAULT_METRIC_WAIT_S


def preflight(session: AwsSession, endpoint: str, variant: str) -> None:
    """Refuse when `drift` finds an error on the endpoint (SPEC §4: drift always first)."""
    report = read_and_check(session, endpoint, variant=variant)
    if report.errors:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise RefusalError(
            f"preflight drift on {endpoint}: {first.rule.value}: {first.resource}: "
            f"{first.message}{more}; run `tts-bench drift --endpoint {endpoint}` and fix it first"
        )


def read_target(session: AwsSession, request: LiveLadderRequest) -> EndpointTarget:
    target = read_endpoint_target(
        session, request.endpoint, request.variant, request.transport, request.model
    )
    target.refuse_not_in_service()
    target.refuse_bounded()
    return target


def run_live_ladder(
    session: AwsSession,
    request: LiveLadderRequest,
    progress: Log,
    log: Log,
    extra_args: Sequence[str] = (),
) -> Path:
    """Measure the ladder on the endpoint; returns the artifact path (ratios joined)."""
    if request.transport.is_local:
        raise RefusalError(f"--transport {request.transport.value} is a local transport")
    preflight(session, request.endpoint, request.variant)
    read_target(session, request)  # refuse before anything changes
    with frozen_scaling(session, request.endpoint, request.variant, log=log):
        target = read_target(session, request)
        ladder = LadderRequest(
            host=session.endpoint_url("sagemaker-runtime"), schedule=request.schedule,
            slo_ms=request.slo_ms, transport=request.transport.value, corpus=request.corpus,
            model=request.model, out=request.out, processes=request.processes,
        )  # fmt: skip
        args = ["--endpoint", request.endpoint, "--variant", request.variant]
        args += ["--region", session.region, *extra_args]
        path = run_ladder(ladder, target.fingerprint, progress, args, target.provenance_kind)
    return join_cloudwatch(session, request, path, log)


def join_cloudwatch(session: AwsSession, request: LiveLadderRequest, path: Path, log: Log) -> Path:
    """Rewrite the artifact at `path` with each rung's `cloudwatch_ratio`."""
    artifact = load_artifact(path, QmaxArtifact)
    ladder = artifact.ladder
    if ladder is None or ladder.start_epoch is None:
        return path
    start = ladder.measure_window(0)[0]
    end = ladder.measure_window(len(artifact.rungs) - 1)[1]
    points = await_concurrency(
        session, request.endpoint, request.variant, start, end,
        wait_s=request.metric_wait_s, log=log,
    )  # fmt: skip
    joined = ratios_for(artifact, points)
    for rung in joined.rungs:
        ratio = "-" if rung.cloudwatch_ratio is None else f"{rung.cloudwatch_ratio:.2f}"
        log(f"rung c={rung.concurrency}: CloudWatch/client in-flight ratio {ratio}")
    return write_artifact(joined, path.parent, path.name)
