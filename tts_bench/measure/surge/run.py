"""`tts-bench surge`: open-loop Poisson arrivals against one instance bounded at Q_max.

Why its own asyncio loop and not Locust: Locust's users are closed loops (a user sends when
its last request ended), which is exactly what hides coordinated omission. Here one
dispatcher sends each request at its intended time from a fixed Poisson schedule
(`figures.poisson_arrivals`), whatever is still outstanding, and every request is its
own task; the sender's own lag is recorded (`Sample.start − Sample.intended_start`) and the
latency is taken from the intended time. Times come from one monotonic clock anchored to the
epoch once, so a request can never appear to leave before it was meant to.

Locally (no `--host`) it starts `python -m tts_server` with `MAX_QUEUE_DEPTH` = the ladder's
Q_max; with `--host` the server's /ping must report that bound and the ladder's fingerprint.
On an endpoint (`response-stream`) the deployed Model must set that bound (deploy the plan made
from this ladder) and be the ladder's build; scaling is frozen to one instance for the run, and
each invocation runs on a worker thread (boto3 blocks) from its intended send time.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tts_bench.artifacts.files import sha256_file, write_artifact
from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.provenance import Provenance, ProvenanceKind
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.surge import SurgeArtifact, SurgeRun, surge_filename
from tts_bench.aws.freeze import frozen_scaling
from tts_bench.aws.session import AwsSession
from tts_bench.errors import RefusalError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.open_loop import (
    REQUEST_TIMEOUT_S,
    STREAM_THREADS,
    EpochClock,
    OpenLoopSender,
    StreamEndpoint,
)
from tts_bench.measure.sagemaker_target import EndpointTarget, read_endpoint_target
from tts_bench.measure.samples import Sample, samples_path, write_samples
from tts_bench.measure.surge.figures import poisson_arrivals, rate_seed, surge_run
from tts_bench.measure.transport.contract import KOKORO, EndpointContract
from tts_bench.measure.transport.response_stream import (
    runtime_client,
)
from tts_bench.serving.local_server import LocalServer
from tts_bench.serving.server_ping import CURVE_MODEL, PingStatus, fetch_ping

IDLE_BETWEEN_RATES_S = 2.0  # the next rate starts on an idle server
SETTLE_TIMEOUT_S = 300.0  # for the frozen endpoint to come down to one instance
SETTLE_POLL_S = 2.0


@dataclass(frozen=True, slots=True)
class SurgeRequest:
    qmax_path: Path
    qmax: QmaxArtifact
    rates_rps: Sequence[float]
    duration_s: float
    transport: Transport
    utterances: Sequence[Utterance]
    seed: int
    contract: EndpointContract = KOKORO  # the ladder's (`contract_of_ladder`)


def check_target(ping: PingStatus, qmax: QmaxArtifact, transport: Transport) -> Fingerprint:
    """The server must be the ladder's build, ready, and bounded at the ladder's Q_max."""
    if not ping.ready:
        raise RefusalError(f"/ping says {ping.status!r}: wait until the server is ready")
    if ping.queue_max_depth != qmax.refined_q_max:
        raise RefusalError(
            f"the server's admission bound is {ping.queue_max_depth}, not the ladder's Q_max "
            f"{qmax.refined_q_max}: start it with MAX_QUEUE_DEPTH={qmax.refined_q_max}"
        )
    fingerprint = ping.fingerprint(transport)
    if (
        qmax.fingerprint is not None
        and fingerprint.model_copy(update={"transport": qmax.fingerprint.transport})
        != qmax.fingerprint
    ):
        raise RefusalError(
            "the server is not the build the ladder measured (fingerprints differ): "
            "surge the same image and performance settings"
        )
    return fingerprint


CURVE_SURGE_NOTE = (
    "a curve instance with set service times (its /ping names instance_model curve): the "
    "admission gate's shedding against a known service law; no engine was measured"
)


def local_kind(ping: PingStatus) -> tuple[ProvenanceKind, str | None]:
    """A server on --host is measured, unless its /ping names a curve instance: that one only
    sleeps its set service times, so what a surge on it shows is the gate, not an engine."""
    if ping.instance_model == CURVE_MODEL:
        return "simulated", CURVE_SURGE_NOTE
    return "measured", None


def run_surge(
    request: SurgeRequest,
    sender: OpenLoopSender,
    fingerprint: Fingerprint,
    source: tuple[ProvenanceKind, str],
    say: Callable[[str], None],
    curve_modelled: bool = False,
    notes: str | None = None,
) -> tuple[SurgeArtifact, list[Sample]]:
    """One open-loop run per rate, one after another, on an instance bounded at Q_max;
    `source` is the provenance (kind, where); `curve_modelled` marks a local cloud's curve
    instance's run; `notes` go into the provenance."""
    samples: list[Sample] = []
    runs: list[SurgeRun] = []
    clock = sender.clock
    try:
        for i, rate in enumerate(request.rates_rps):
            seed = rate_seed(request.seed, i)
            offsets = poisson_arrivals(rate, request.duration_s, seed)
            start = clock.now() + 0.5
            say(
                f"rate {rate:g} rps for {request.duration_s:g} s: {len(offsets)} arrivals "
                f"(seed {seed}), admission bound {request.qmax.refined_q_max}"
            )
            got = asyncio.run(sender.run([start + float(o) for o in offsets]))
            samples.extend(got)
            run = surge_run(samples, request.qmax, rate, request.duration_s, seed, start)
            runs.append(run)
            say(describe_run(run))
            # The next run's arrivals begin after this run's span has ended: the samples file
            # tells runs apart by intended send time alone, so the spans never overlap.
            end = start + request.duration_s
            time.sleep(max(0.0, end - clock.now()) + IDLE_BETWEEN_RATES_S)
    finally:
        sender.close()
    artifact = SurgeArtifact(
        fingerprint=fingerprint,
        q_max=request.qmax.refined_q_max,  # type: ignore[arg-type]
        qmax_path=str(request.qmax_path),
        qmax_sha256=sha256_file(request.qmax_path),
        runs=runs,
        provenance=Provenance.now(*source, curve_modelled=curve_modelled, notes=notes),
    )
    return artifact, samples


def describe_run(run: SurgeRun) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f} ms"

    p = run.prediction
    return (
        f"rate {run.rate_rps:g} rps: {run.arrivals} arrivals, shed {run.shed} "
        f"({run.shed_share:.1%}; model {p.shed_share:.1%}), admitted TTFAB p95 "
        f"{ms(run.ttfab_p95_ms)} p99 {ms(run.ttfab_p99_ms)} from the intended send time "
        f"(p95 {ms(run.send_ttfab_p95_ms)} from the send), mean occupancy "
        f"{run.mean_occupancy:.2f} (model {p.mean_occupancy:.2f}), peak {run.max_occupancy}, "
        f"Q_max reached: {'yes' if run.reached_q_max else 'no'} (model "
        f"{p.reach_probability:.0%} of {p.trials} trials)"
    )


@dataclass(frozen=True, slots=True)
class SurgeWritten:
    path: Path
    samples_path: Path
    png: Path
    artifact: SurgeArtifact


@dataclass(frozen=True, slots=True)
class SurgeEndpoint:
    """A SageMaker endpoint to surge over response-stream, and the session that reaches it."""

    session: AwsSession
    endpoint: str
    variant: str
    model: str = "kokoro-82m"


def measure_surge(
    request: SurgeRequest,
    host: str | None,
    out: Path,
    say: Callable[[str], None],
    server_args: Sequence[str] = (),
    log_path: Path | None = None,
    endpoint: SurgeEndpoint | None = None,
) -> SurgeWritten:
    """Run the surge (on `endpoint`, on `host`, or on a bounded local server started here) and
    write the artifact, its raw samples and the occupancy plot."""
    from tts_bench.measure.plots import plot_surge

    check_where(request.transport, host, endpoint is not None)
    q_max = request.qmax.refined_q_max
    if q_max is None:
        raise RefusalError(
            "the ladder found no Q_max: there is no admission bound to surge against"
        )
    clock = EpochClock()
    kind: ProvenanceKind = "measured"
    if endpoint is None and request.contract is not KOKORO:
        raise RefusalError(
            f"--contract {request.contract.name}: a local surge starts or pings this project's "
            "server; surge another container on an endpoint (a local cloud can host it: "
            "local-cloud --container-cmd)"
        )
    if endpoint is not None:
        artifact, samples = surge_endpoint(request, endpoint, clock, say)
        fingerprint, kind = artifact.fingerprint, artifact.provenance.kind  # type: ignore[assignment]
    elif host is None:
        env = {**os.environ, "MAX_QUEUE_DEPTH": str(q_max)}
        say(f"starting a local server bounded at MAX_QUEUE_DEPTH={q_max}")
        with LocalServer(server_args, env=env, log_path=log_path) as server:
            ping = server.wait_ready(progress=say)
            fingerprint = check_target(ping, request.qmax, request.transport)
            sender = OpenLoopSender(server.url, request.transport, request.utterances, clock)
            artifact, samples = run_surge(
                request, sender, fingerprint, ("measured", server.url), say
            )
    else:
        ping = fetch_ping(host)
        fingerprint = check_target(ping, request.qmax, request.transport)
        sender = OpenLoopSender(host, request.transport, request.utterances, clock)
        kind, notes = local_kind(ping)
        artifact, samples = run_surge(request, sender, fingerprint, (kind, host), say, notes=notes)
    path = write_artifact(artifact, out, surge_filename(fingerprint, kind))  # type: ignore[arg-type]
    written_samples = write_samples(samples_path(path), samples)
    png = plot_surge(artifact, path.with_suffix(".png"))
    return SurgeWritten(path, written_samples, png, artifact)


def check_where(transport: Transport, host: str | None, endpoint: bool) -> None:
    """Refuse a transport and target that do not go together, before anything starts."""
    if transport is Transport.BIDI_STREAM:
        raise RefusalError(
            "--transport bidi-stream: the surge is not built over the bidirectional stream; use "
            "response-stream on an endpoint, or local-ws for the same container path locally"
        )
    if transport is Transport.RESPONSE_STREAM and (not endpoint or host is not None):
        raise RefusalError("--transport response-stream surges an endpoint: pass --endpoint NAME")
    if transport.is_local and endpoint:
        raise RefusalError(
            f"--transport {transport.value} is local: an endpoint takes response-stream"
        )


def check_endpoint(
    target: EndpointTarget, qmax: QmaxArtifact, contract: EndpointContract = KOKORO
) -> Fingerprint:
    """The endpoint must be in service, bounded at the ladder's Q_max, and the ladder's build.
    A container whose contract publishes what it admits (Sonic-3: 4) is bounded by itself."""
    target = target.under_contract(contract.ref)
    target.refuse_not_in_service()
    admits = None if contract.admits is None else str(contract.admits)
    if (target.queue_max_depth or admits) != str(qmax.refined_q_max):
        bound = (
            f"MAX_QUEUE_DEPTH={target.queue_max_depth}"
            if target.queue_max_depth is not None
            else f"no admission bound but its container's {admits} (contract {contract.name})"
            if admits is not None
            else "no admission bound"
        )
        raise RefusalError(
            f"endpoint {target.endpoint}'s Model sets {bound}, not the ladder's Q_max "
            f"{qmax.refined_q_max}: deploy the plan made from this ladder (its admission bound "
            "is Q_max) first"
        )
    if (
        qmax.fingerprint is not None
        and target.fingerprint.model_copy(update={"transport": qmax.fingerprint.transport})
        != qmax.fingerprint
    ):
        raise RefusalError(
            f"endpoint {target.endpoint} is not the build the ladder measured (fingerprints "
            "differ): surge the same image and instance type"
        )
    return target.fingerprint


def settled_to_one(
    session: AwsSession, where: SurgeEndpoint, say: Callable[[str], None]
) -> EndpointTarget:
    """Under the freeze: wait until the variant serves from exactly one instance."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        target = read_endpoint_target(
            session, where.endpoint, where.variant, Transport.RESPONSE_STREAM, where.model
        )
        if target.status == "InService" and target.current_instances == 1:
            return target
        if time.monotonic() >= deadline:
            raise RefusalError(
                f"endpoint {where.endpoint} did not come down to one instance within "
                f"{SETTLE_TIMEOUT_S:g} s (it is {target.status} with {target.current_instances})"
            )
        say(f"waiting for one instance ({target.status}, {target.current_instances} now)")
        time.sleep(SETTLE_POLL_S)


def surge_endpoint(
    request: SurgeRequest, where: SurgeEndpoint, clock: EpochClock, say: Callable[[str], None]
) -> tuple[SurgeArtifact, list[Sample]]:
    """The surge over response-stream, with scaling frozen to one instance for its length."""
    session = where.session
    check_endpoint(
        read_endpoint_target(
            session, where.endpoint, where.variant, Transport.RESPONSE_STREAM, where.model
        ),
        request.qmax,
        request.contract,
    )  # refused before anything changes
    with frozen_scaling(session, where.endpoint, where.variant, log=say):
        target = settled_to_one(session, where, say)
        fingerprint = check_endpoint(target, request.qmax, request.contract)
        client = runtime_client(session.region, STREAM_THREADS, REQUEST_TIMEOUT_S)
        stream = StreamEndpoint(client, where.endpoint, where.variant)
        sender = OpenLoopSender(
            "", request.transport, request.utterances, clock, stream, contract=request.contract
        )
        where = (target.provenance_kind, target.source)
        return run_surge(request, sender, fingerprint, where, say, target.curve_modelled)


# Per rate in the main job: long enough for LOCAL_SURGE_ARRIVALS at the higher rate, within
# [LOCAL_SURGE_MIN_S, LOCAL_SURGE_MAX_S], so the whole job stays near six minutes on 2 cores.
# A check that the surge path and the model's prediction run end to end, not a figure to quote:
# ten-odd arrivals say little about a shed share; `tts-bench surge --duration-s` measures one.
LOCAL_SURGE_ARRIVALS = 10
LOCAL_SURGE_MIN_S = 20.0
LOCAL_SURGE_MAX_S = 40.0


def local_surge_duration_s(higher_rate_rps: float) -> float:
    wanted = LOCAL_SURGE_ARRIVALS / higher_rate_rps
    return min(LOCAL_SURGE_MAX_S, max(LOCAL_SURGE_MIN_S, wanted))


def local_surge_check(
    qmax_path: Path,
    utterances: Sequence[Utterance],
    out: Path,
    say: Callable[[str], None],
    server_args: Sequence[str] = (),
    log_path: Path | None = None,
    endpoint: SurgeEndpoint | None = None,
    duration_s: float | None = None,
) -> SurgeWritten | None:
    """The main job's surge step: one rate below X(Q_max) and one above, against a fresh local
    server bounded at Q_max, or over response-stream against `endpoint` (deployed with the
    plan, so bounded at Q_max); prints how close the model came. None when there is no Q_max.
    `duration_s` per rate, else `local_surge_duration_s` of the higher rate."""
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.measure.surge.figures import ABOVE_SHARE, BELOW_SHARE, surge_note
    from tts_bench.planning.curve import throughput_curve

    qmax = load_artifact(qmax_path, QmaxArtifact)
    if qmax.refined_q_max is None:
        say("surge check skipped: the ladder found no Q_max")
        return None
    x = throughput_curve(qmax.curve_rungs)(qmax.refined_q_max)
    transport = Transport.LOCAL_HTTP if endpoint is None else Transport.RESPONSE_STREAM
    request = SurgeRequest(
        qmax_path=qmax_path, qmax=qmax, rates_rps=[BELOW_SHARE * x, ABOVE_SHARE * x],
        duration_s=duration_s or local_surge_duration_s(ABOVE_SHARE * x), transport=transport,
        utterances=utterances, seed=1,
    )  # fmt: skip
    written = measure_surge(request, None, out, say, server_args, log_path, endpoint)
    say(surge_note(written.artifact.runs, x))
    say(f"surge artifact: {written.path} (plot {written.png})")
    return written
