"""`tts-bench rehearse`: the one path from the command's arguments to a written rehearsal.

1. Load the plan and the qmax and ttotal it was derived from (by sha256), and the traffic.
2. With `--dry-run`: simulate the plan on the fleet's own traffic (no AWS call) and print the
   instance-hours and their cost; nothing is sent.
3. Read the endpoint (`endpoint.read_rehearsal_target`): any reason not to rehearse is a one-line
   refusal before anything is sent. Print the same estimate for the deployed bounds.
4. Send the arrivals open-loop over response-stream from the next whole minute of the service's
   clock (so the runs' metric periods and alarm evaluations line up), the endpoint polled
   meanwhile; then read back what CloudWatch and Application Auto Scaling recorded.
5. Replay the same arrivals in the simulator (the primary seed and `replays` − 1 more), and the
   fleet's own traffic unscaled; judge the agreement; write the artifact and its PNG.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts_bench.artifacts.files import load_artifact, sha256_file, write_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rehearsal import (
    Agreement,
    DesiredAgreement,
    LagAgreement,
    RehearsalArtifact,
    RehearsalInputs,
    Replay,
    Run,
    ShedAgreement,
    UnscaledPrediction,
    rehearsal_filename,
)
from tts_bench.artifacts.simulation import AwsSemanticsRecord, InputFile
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.aws.clock import ServiceClock
from tts_bench.aws.scaling_record import EndpointPoller, read_back
from tts_bench.aws.session import AwsSession
from tts_bench.errors import TtsBenchError
from tts_bench.measure.corpus import corpus_path, load_corpus
from tts_bench.measure.open_loop import EpochClock, OpenLoopSender, StreamEndpoint
from tts_bench.measure.transport.contract import contract_of_ladder
from tts_bench.measure.transport.response_stream import runtime_client
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics
from tts_bench.planning.from_files import source_file
from tts_bench.rehearse.agreement import (
    REQUIRED_SHARE,
    Steps,
    band_passed,
    desired_agreement,
    exchangeable,
    replay_band,
    scaled_out_before_shedding,
    shed_range,
    shed_spread,
    within_band,
)
from tts_bench.rehearse.arrivals import (
    WALL_BUDGET_RPS,
    Arrivals,
    TrafficSpec,
    fleet_traffic,
    rehearsal_arrivals,
)
from tts_bench.rehearse.endpoint import RehearsalTarget, read_rehearsal_target
from tts_bench.rehearse.plot import plot_rehearsal
from tts_bench.rehearse.replay import ReplaySetup, desired_steps, replay_arrivals, unscaled
from tts_bench.rehearse.runs import Rehearsed, rehearsed_run, simulated_alarms, simulated_run
from tts_bench.simulate.from_files import SimulationRequest, check_pairing
from tts_bench.simulate.replay import PolicyRun, initial_instances

DEFAULT_REPLAYS = 10
MAX_REPLAYS = 100
MAX_SENDER_THREADS = 1024  # streams in flight at once; past it a send waits (its lag recorded)
MIN_SENDER_THREADS = 64
SETTLE_EMULATED_S = 30.0  # of the service's clock after the end, for the last datapoints
SETTLE_AWS_S = 180.0
START_LEAD_WALL_S = 1.0  # the first whole minute at least this far ahead (wall seconds)
SECONDS_PER_HOUR = 3600.0

Say = Callable[[str], None]


@dataclass(frozen=True)
class RehearsalRequest:
    plan: Path
    endpoint: str | None
    variant: str
    traffic: TrafficSpec
    time_scale: float | None = None
    seed: int = 1
    out: Path = Path("measurements")
    dry_run: bool = False
    price_per_hour_usd: float | None = None
    qmax: Path | None = None
    ttotal: Path | None = None
    replays: int = DEFAULT_REPLAYS
    model: str = "kokoro-82m"
    corpus: Path | None = None
    command: str | None = None
    contract: str | None = None  # --contract as given (None: kokoro); must be the plan's
    # The replays' reading of AWS's open points; a local cloud must run under the same one.
    semantics: AwsSemantics = DOCUMENTED


@dataclass(frozen=True)
class Inputs:
    plan: PlanArtifact
    qmax: QmaxArtifact
    ttotal: TtotalArtifact
    files: dict[str, InputFile]


@dataclass(frozen=True)
class Rehearsal:
    artifact: RehearsalArtifact
    path: Path
    png: Path


def check_request(request: RehearsalRequest) -> None:
    if request.seed < 0:
        raise TtsBenchError(f"--seed {request.seed}: give 0 or more")
    if not 1 <= request.replays <= MAX_REPLAYS:
        raise TtsBenchError(f"--replays {request.replays}: give 1 to {MAX_REPLAYS}")
    if request.price_per_hour_usd is not None and not 0 <= request.price_per_hour_usd <= 1e9:
        raise TtsBenchError("--price-per-hour: give 0 to 1e9 USD per instance-hour")
    if request.time_scale is not None and not request.time_scale > 0:
        raise TtsBenchError(f"--time-scale {request.time_scale:g}: give a positive number")
    if not request.dry_run and not request.endpoint:
        raise TtsBenchError("--endpoint NAME: the endpoint to rehearse on (or --dry-run)")


def load_inputs(request: RehearsalRequest) -> Inputs:
    plan = load_artifact(request.plan, PlanArtifact)
    qmax_path = request.qmax or source_file(plan, request.plan, "qmax", "--qmax")
    ttotal_path = request.ttotal or source_file(plan, request.plan, "ttotal", "--ttotal")
    qmax = load_artifact(qmax_path, QmaxArtifact)
    ttotal = load_artifact(ttotal_path, TtotalArtifact)
    paths = SimulationRequest(
        plan=request.plan,
        qmax=qmax_path,
        ttotal=ttotal_path,
        trace=request.traffic.trace,
        synthetic=request.traffic.synthetic,
        duration_s=request.traffic.duration_s,
        policies=("plan",),
        seed=request.seed,
        price_per_hour_usd=request.price_per_hour_usd,
        out=request.out,
    )
    check_pairing(plan, qmax, ttotal, paths)
    files = {
        name: InputFile(path=str(path), sha256=sha256_file(path))
        for name, path in (
            ("plan", request.plan),
            ("qmax", qmax_path),
            ("ttotal", ttotal_path),
            ("trace", request.traffic.trace),
        )
        if path is not None
    }
    return Inputs(plan, qmax, ttotal, files)


def predict(
    inputs: Inputs,
    request: RehearsalRequest,
    bounds: tuple[int, int] | None,
    initial: int | None,
) -> tuple[UnscaledPrediction, float]:
    """The fleet model on the fleet's own traffic: the run's instance-hours and cost, before
    anything is sent. Without an endpoint, the plan's bounds and the plan's initial sizing."""
    setup = ReplaySetup.of(
        inputs.plan,
        inputs.qmax,
        inputs.ttotal,
        bounds or (inputs.plan.min_instances, inputs.plan.max_instances),
        initial or 1,
        1.0,
        request.semantics,
    )
    traffic = fleet_traffic(
        request.traffic, setup.shape.surge_hold_s, np.random.default_rng(request.seed)
    )
    if initial is None:
        start = initial_instances(setup.policy, traffic, setup.shape.sizing_rps)
        setup = ReplaySetup(setup.shape, setup.curves, setup.policy, start)
    run = unscaled(setup, traffic, request.seed)
    hours = run.instance_seconds / SECONDS_PER_HOUR
    price = request.price_per_hour_usd
    prediction = UnscaledPrediction(
        requests=run.requests,
        shed_share=round(run.shed / run.requests, 9) if run.requests else 0.0,
        instance_hours=round(hours, 3),
        peak_instances=run.peak_instances,
        cost_usd=None if price is None else round(hours * price, 2),
    )
    return prediction, traffic.duration_s


def describe_prediction(
    prediction: UnscaledPrediction, duration_s: float, time_scale: float
) -> str:
    cost = "" if prediction.cost_usd is None else f", ${prediction.cost_usd:,.2f}"
    return (
        f"{duration_s / 60:.0f} min of the service's clock ({duration_s / time_scale / 60:.1f} min "
        f"wall): the plan simulated on this traffic runs {prediction.instance_hours:,.2f} "
        f"instance-hours{cost}, at most {prediction.peak_instances} instances, shedding "
        f"{100 * prediction.shed_share:.4f} % of {prediction.requests:,} requests"
    )


def _threads(target: RehearsalTarget, plan: PlanArtifact) -> int:
    return min(
        MAX_SENDER_THREADS, max(MIN_SENDER_THREADS, target.max_instances * plan.queue_max_depth)
    )


def _start_of_next_minute(clock: ServiceClock) -> float:
    lead = clock.now() + START_LEAD_WALL_S * clock.scale
    return math.ceil(lead / 60.0) * 60.0


def send_and_record(
    session: AwsSession,
    request: RehearsalRequest,
    inputs: Inputs,
    target: RehearsalTarget,
    arrivals: Arrivals,
    say: Say,
) -> Rehearsed:
    """The arrivals sent open-loop from the next whole minute; the endpoint polled meanwhile;
    what CloudWatch and Application Auto Scaling recorded read back afterwards."""
    clock = target.clock
    threads = _threads(target, inputs.plan)
    client = runtime_client(session.region, threads)
    utterances = load_corpus(corpus_path(request.corpus))
    sender = OpenLoopSender(
        "",
        Transport.RESPONSE_STREAM,
        utterances,
        EpochClock(),
        StreamEndpoint(client, target.target.endpoint, target.target.variant),
        threads,
        target.contract,
    )
    start_s = _start_of_next_minute(clock)
    end_s = start_s + arrivals.duration_s
    intended = [clock.to_wall(start_s + float(t)) for t in arrivals.times_s]
    poller = EndpointPoller(session, target.target.endpoint, target.target.variant, clock, start_s)
    poller.start()
    say(
        f"sending {arrivals.count:,} requests from {time.strftime('%H:%M:%S', time.localtime(clock.to_wall(start_s)))} "
        f"(wall), over response-stream, up to {threads} at once"
    )
    try:
        samples = asyncio.run(sender.run(intended))
    finally:
        sender.close()
        settle = SETTLE_EMULATED_S if target.target.emulated else SETTLE_AWS_S
        time.sleep(max(0.0, clock.to_wall(end_s + settle) - time.time()))
        poller.stop()
    say(f"sent {len(samples):,}; reading back the metrics, alarm history and scaling activities")
    recorded = read_back(session, target.watched, start_s, end_s)
    return Rehearsed(
        samples,
        poller.polls,
        recorded,
        lambda epoch: clock.to_virtual(epoch) - start_s,
        arrivals.duration_s,
        target.in_service,
    )


def _first(run: Run, scale_out: bool) -> float | None:
    if scale_out:
        return next((a.t_s for a in run.actions if a.after > a.before), None)
    return next((w.t_s - 10 for w in run.windows if w.shed), None)


def judge_desired(
    rehearsed: Run,
    replays: list[PolicyRun],
    shift_s: float,
    duration_s: float,
    initial: int,
    rule: str = "published",
) -> tuple[DesiredAgreement, list[float]]:
    """The rehearsal's desired counts against every replay's, and the replays' among themselves,
    over the minutes after the first scale-out of any run (`agreement`); each replay's share.
    The fleet rule is judged by the replays' band, the published one pairwise."""
    ours = Steps(
        [w.t_s for w in rehearsed.windows], [float(w.desired or 0) for w in rehearsed.windows]
    )
    lines = [desired_steps(run, initial) for run in replays]
    firsts = [_first(rehearsed, True)] + [
        next((t for t, a in run.actions if a.out), None) for run in replays
    ]
    from_s = min((t for t in firsts if t is not None), default=0.0)

    def counts(a: Steps, b: Steps) -> tuple[int, int]:
        return desired_agreement(a, b, from_s, duration_s, shift_s, initial)

    def agree(a: Steps, b: Steps) -> bool:
        minutes, agreeing = counts(a, b)
        return not minutes or agreeing / minutes >= REQUIRED_SHARE

    per_replay = [counts(ours, line) for line in lines]
    band = replay_band(lines, from_s, duration_s, shift_s, initial)
    pairwise = [[i == j or agree(a, b) for j, b in enumerate(lines)] for i, a in enumerate(lines)]
    judged = exchangeable([agree(ours, line) for line in lines], pairwise)
    minutes, agreeing = per_replay[0]
    shares = [a / m if m else 1.0 for m, a in per_replay]
    inside = within_band(ours, band, initial)
    by_band = rule == "fleet"
    desired = DesiredAgreement(
        minutes=minutes,
        agreeing=agreeing,
        share=round(shares[0], 4),
        shift_s=shift_s,
        required=REQUIRED_SHARE,
        replays_agreeing=sum(s >= REQUIRED_SHARE for s in shares),
        replays_share=round(judged.share, 4),
        replay_quantile=round(judged.replay_quantile, 4),
        passed=band_passed(inside, len(band)) if by_band else judged.passed,
        verdict="band" if by_band else "pairwise",
        within_replays=inside,
        band=band,
    )
    return desired, shares


def judge(
    rehearsed: Run,
    simulated: Run,
    replays: list[PolicyRun],
    shift_s: float,
    duration_s: float,
    initial: int,
    setup: ReplaySetup,
    rule: str = "published",
) -> tuple[Agreement, list[float]]:
    """The agreement of the rehearsed run with the replays (and each replay's desired share);
    the fleet rule by the replays' band and shed range, the published one pairwise."""
    desired, per_replay = judge_desired(rehearsed, replays, shift_s, duration_s, initial, rule)
    shares = [run.shed / run.requests if run.requests else 0.0 for run in replays]
    spread = shed_spread(rehearsed.totals.shed_share, rehearsed.totals.requests, shares)
    ranged = shed_range(rehearsed.totals.shed_share, rehearsed.totals.requests, shares)
    by_range = rule == "fleet"
    lags = [
        LagAgreement(
            role=alarm.role,
            modelled_s=alarm.rule.detection_s,
            rehearsed_s=[
                a.lag_s for a in rehearsed.actions if a.role == alarm.role and a.lag_s is not None
            ],
            simulated_s=[
                a.lag_s for a in simulated.actions if a.role == alarm.role and a.lag_s is not None
            ],
        )
        for alarm in simulated_alarms(setup.shape)
        if alarm.scales_out
    ]
    agreement = Agreement(
        desired=desired,
        shed=ShedAgreement(
            rehearsed=rehearsed.totals.shed_share,
            simulated_mean=round(spread.mean, 9),
            simulated_sd=round(spread.sd, 9),
            tolerance=round(spread.tolerance, 9),
            passed=ranged.passed if by_range else spread.passed,
            verdict="range" if by_range else "spread",
            replays_low=round(ranged.low, 9),
            replays_high=round(ranged.high, 9),
        ),
        lags=lags,
        scaled_out_before_shedding=scaled_out_before_shedding(
            _first(rehearsed, True), _first(rehearsed, False)
        ),
    )
    return agreement, per_replay


@dataclass(frozen=True)
class Prepared:
    """The endpoint read and checked, the arrivals drawn and the estimate printed."""

    inputs: Inputs
    target: RehearsalTarget
    arrivals: Arrivals
    prediction: UnscaledPrediction

    @property
    def bounds(self) -> tuple[int, int]:
        return self.target.min_instances, self.target.max_instances


def prepare(request: RehearsalRequest, session: AwsSession, say: Say) -> Prepared:
    """Everything before the first request: refusals, arrivals, the estimate."""
    check_request(request)
    inputs = load_inputs(request)
    assert request.endpoint is not None  # check_request
    measured = inputs.plan.fingerprint.contract if inputs.plan.fingerprint else None
    contract = contract_of_ladder(request.contract, measured, str(request.plan))
    target = read_rehearsal_target(
        session, request.endpoint, request.variant, inputs.plan, request.model, request.time_scale,
        contract,
    )  # fmt: skip
    hold_s = inputs.plan.inputs.planned_total_s
    arrivals = rehearsal_arrivals(request.traffic, target.thinning, hold_s, request.seed)
    bounds = (target.min_instances, target.max_instances)
    prediction, _ = predict(inputs, request, bounds, target.in_service)
    say(describe_prediction(prediction, arrivals.duration_s, target.clock.scale))
    peak = arrivals.peak_wall_rps(target.clock.scale)
    say(
        f"{arrivals.count:,} requests, each standing for {target.thinning:g} of the fleet's "
        f"(rate scale {target.rate_scale:g} × time scale {target.clock.scale:g}); busiest minute "
        f"{peak:.1f} requests per wall second"
    )
    if target.target.emulated and peak > WALL_BUDGET_RPS:
        say(
            f"warning: more than the {WALL_BUDGET_RPS:g} requests/s this machine carries beside "
            "its local cloud; start the cloud with a larger --rate-scale"
        )
    return Prepared(inputs, target, arrivals, prediction)


def rehearse(request: RehearsalRequest, session: AwsSession, say: Say) -> Rehearsal:
    """Refuse or rehearse, replay, judge, write (module docstring)."""
    ready = prepare(request, session, say)
    inputs, target, arrivals = ready.inputs, ready.target, ready.arrivals
    record = send_and_record(session, request, inputs, target, arrivals, say)
    rehearsed = rehearsed_run(record, target.alarms)
    setup = ReplaySetup.of(
        inputs.plan, inputs.qmax, inputs.ttotal, ready.bounds, target.in_service, target.thinning,
        request.semantics,
    )  # fmt: skip
    runs = [
        replay_arrivals(setup, arrivals.times_s, arrivals.duration_s, request.seed + k)
        for k in range(request.replays)
    ]
    simulated = simulated_run(runs[0], setup.shape, target.in_service)
    shift = max(a.rule.period_s for a in target.alarms if a.scales_out)
    agreement, per_replay = judge(
        rehearsed, simulated, runs, shift, arrivals.duration_s, target.in_service, setup,
        inputs.plan.rule,
    )  # fmt: skip
    artifact = RehearsalArtifact(
        fingerprint=inputs.plan.fingerprint,
        inputs=_inputs_record(request, ready, setup),
        rehearsed=rehearsed,
        simulated=simulated,
        replays=[
            Replay(
                seed=request.seed + k,
                shed_share=round(run.shed / run.requests, 9) if run.requests else 0.0,
                instance_hours=round(run.instance_seconds / SECONDS_PER_HOUR, 4),
                desired_agreement=round(share, 4),
            )
            for k, (run, share) in enumerate(zip(runs, per_replay, strict=True))
        ],
        unscaled=ready.prediction,
        agreement=agreement,
        provenance=Provenance.now(
            target.target.provenance_kind,
            target.target.source,
            command=request.command,
            curve_modelled=target.target.curve_modelled,
            notes="replayed by the request-level model (tts_bench.simulate.requests)",
        ),
    )
    return write(artifact, request, target)


def _inputs_record(
    request: RehearsalRequest, ready: Prepared, setup: ReplaySetup
) -> RehearsalInputs:
    target, arrivals = ready.target, ready.arrivals
    return RehearsalInputs(
        traffic=request.traffic.describe(),
        duration_s=arrivals.duration_s,
        seed=request.seed,
        arrivals=arrivals.count,
        endpoint=target.target.endpoint,
        variant=target.target.variant,
        rate_scale=target.rate_scale,
        time_scale=target.clock.scale,
        request_weight=target.thinning,
        min_instances=target.min_instances,
        max_instances=target.max_instances,
        initial_instances=target.in_service,
        start_delay_s=setup.shape.start_delay_s,
        plan_id=ready.inputs.plan.plan_id,
        plan_rule=ready.inputs.plan.rule,
        files=ready.inputs.files,
        replays=request.replays,
        price_per_hour_usd=request.price_per_hour_usd,
        aws_semantics=AwsSemanticsRecord(**request.semantics.record()),
    )


def write(
    artifact: RehearsalArtifact, request: RehearsalRequest, target: RehearsalTarget
) -> Rehearsal:
    """The artifact into `--out` (named after its inputs' hash) and its PNG beside it."""
    digest = hashlib.sha256(
        json.dumps(artifact.inputs.model_dump(mode="json"), sort_keys=True).encode()
    ).hexdigest()
    path = write_artifact(artifact, request.out, rehearsal_filename(artifact, digest))  # type: ignore[type-var]
    title = (
        f"rehearsal of plan {artifact.inputs.plan_id} ({artifact.inputs.plan_rule}) on "
        f"{target.target.endpoint} · {request.traffic.describe()} · S {target.rate_scale:g} "
        f"K {target.clock.scale:g}"
    )
    png = plot_rehearsal(artifact, title, path.with_suffix(".png"))
    return Rehearsal(artifact, path, png)


def dry_run(request: RehearsalRequest) -> str:
    """The estimate alone, at the plan's own bounds and sizing: no AWS call, nothing sent."""
    check_request(request)
    inputs = load_inputs(request)
    clock = ServiceClock.from_environment()
    scale = request.time_scale or clock.scale
    prediction, duration_s = predict(inputs, request, None, None)
    return describe_prediction(prediction, duration_s, scale)


def _band_line(desired: DesiredAgreement, replays: int) -> list[str]:
    if desired.within_replays is None:
        return []  # an artifact written before the band was recorded
    line = (
        f"desired count within the {replays} replays' band (± max(1, 10 %)) on "
        f"{desired.within_replays} of {len(desired.band)} minutes"
    )
    if desired.verdict == "band":
        line += f" (≥ {desired.required:.0%} needed): {'pass' if desired.passed else 'FAIL'}"
    return [line]


def _shed_line(shed: ShedAgreement, replays: int) -> str:
    verdict = "pass" if shed.passed else "FAIL"
    if shed.verdict == "range":
        return (
            f"shed share {100 * shed.rehearsed:.4f} % against the replays' 5–95 % range "
            f"{100 * (shed.replays_low or 0):.4f}–{100 * (shed.replays_high or 0):.4f} % "
            f"({replays} replays, one request's share of slack): {verdict}"
        )
    return (
        f"shed share {100 * shed.rehearsed:.4f} % against {100 * shed.simulated_mean:.4f} % ± "
        f"{100 * shed.tolerance:.4f} % ({replays} replays): {verdict}"
    )


def summary(artifact: RehearsalArtifact) -> list[str]:
    """What the command prints once it is done."""
    a, reh, sim = artifact.agreement, artifact.rehearsed.totals, artifact.simulated.totals
    lines = [
        f"rehearsed: {reh.requests:,} requests, shed {reh.shed:,} ({100 * reh.shed_share:.4f} %), "
        f"{reh.errors} errors, {reh.instance_hours:.2f} instance-hours, desired up to {reh.peak_desired}",
        f"simulated: {sim.requests:,} requests, shed {sim.shed:,} ({100 * sim.shed_share:.4f} %), "
        f"{sim.instance_hours:.2f} instance-hours, desired up to {sim.peak_desired}",
        f"desired counts agree within max(1, 10 %) on {a.desired.agreeing} of {a.desired.minutes} "
        f"minutes after the first scale-out with the primary replay ({100 * a.desired.share:.1f} "
        f"%, shift {a.desired.shift_s:g} s), on 95 % of them with {a.desired.replays_agreeing} of "
        f"{len(artifact.replays)} replays ({100 * a.desired.replays_share:.0f} %; replays agree "
        f"so with at least {100 * a.desired.replay_quantile:.0f} % of each other, 5 % quantile)"
        + (
            f": {'pass' if a.desired.passed else 'FAIL'}"
            if a.desired.verdict == "pairwise"
            else " (not the verdict for this rule)"
        ),
        *_band_line(a.desired, len(artifact.replays)),
        _shed_line(a.shed, len(artifact.replays)),
    ]
    for lag in a.lags:

        def mean(v: list[float]) -> str:
            return f"{sum(v) / len(v):.1f} s over {len(v)}" if v else "none"

        lines.append(
            f"detection lag of {lag.role}: rehearsed {mean(lag.rehearsed_s)}, simulated "
            f"{mean(lag.simulated_s)} (modelled {lag.modelled_s:g} s)"
        )
    verdict = {True: "yes", False: "no", None: "neither happened"}[a.scaled_out_before_shedding]
    lines.append(f"scaled out before shedding: {verdict}")
    return lines
