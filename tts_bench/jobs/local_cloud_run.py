"""The main job through the local cloud: the whole chain with the AWS clients a user would run.

1. start the local cloud (moto + the runtime on loopback; the dev stack deployed from its
   preview, image replaced by the working tree's local digest) and point this process's AWS
   clients at it;
2. `drift` (read-only preflight), then state a local SLO: a CPU serves Kokoro tens of times
   slower than the GPU the production SLO is meant for, so unless given it is a multiple of
   the endpoint's own uncontended p95 TTFAB, read over response-stream;
3. `qmax` over response-stream with a short ladder that brackets (freeze, Locust, CloudWatch);
4. `ttotal` force-desired (quota check, probe, one more instance, stages, capacity restored);
5. `plan` over the pair (an emulated plan: it names the local digest and gates only it);
6. deploy again from the preview with the new plan (the local stand-in for `pulumi up`): the
   scaling resources now exist with the plan's values; `validate` compares them;
7. the surge check on that endpoint (bounded at Q_max by the plan): open-loop arrivals at one
   rate below X(Q_max) and one above, against the birth–death model's prediction;
8. the plots; then everything the job started is stopped.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tts_bench.artifacts.fingerprint import Transport, ttotal_filename
from tts_bench.artifacts.schema import (
    PlanArtifact,
    QmaxArtifact,
    Trigger,
    TtotalArtifact,
    load_artifact,
    write_artifact,
)
from tts_bench.aws.drift import read_and_check
from tts_bench.aws.session import AwsSession
from tts_bench.aws.validate import Comparison, read_and_compare
from tts_bench.errors import TtsBenchError
from tts_bench.infra.stack_config import StackConfig, program_config, project_name, stack_values
from tts_bench.jobs.local_run import CALIBRATION_REQUESTS, SLO_MULTIPLE, calibrated_slo_ms
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ladder import LadderSchedule, format_duration
from tts_bench.measure.live_ladder import LiveLadderRequest, run_live_ladder
from tts_bench.measure.response_stream import runtime_client
from tts_bench.measure.surge_run import SurgeEndpoint, local_surge_check
from tts_bench.measure.ttotal_sagemaker import (
    ProbeSample,
    SageMakerTtotalRequest,
    StreamProbe,
    measure_sagemaker_ttotal,
)
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.plan import PlanRequest
from tts_bench.planning.report import render_plan

# Short enough for about six minutes on 2 cores, long enough to bracket at SLO_MULTIPLE × c=1.
CLOUD_RUNGS = (1, 2, 4)
CLOUD_HOLD_S = 30.0
CLOUD_MEASURE_S = 20.0
CLOUD_IDLE_S = 2.0
# The local cloud publishes each 10 s period as it closes: no minutes-long CloudWatch delay.
CLOUD_METRIC_WAIT_S = 30.0
MIN_REQUESTS_PER_WINDOW = 3
# T_total: a probe of 2 users. On SageMaker a probe of twice a rung is judged against that rung
# (two instances, twice the capacity); here both instances share this machine's 2 cores, so after
# the scale-out the machine still carries the c=2 rung's load, and recovery is judged against
# that rung's p95 (x1.5 for a 10 s window's noise). Judged against c=1 (x2, measured 2026-12-01)
# it recovered after 18 s in one run and 190 s in the next: a coin toss on the machine's noise.
CLOUD_PROBE_USERS = 2
CLOUD_BOUND_RUNG = 2
CLOUD_RECOVERY_FACTOR = 1.5
CLOUD_RECOVERY_HOLD_S = 15.0
CLOUD_WARMUP_S = 8.0
CLOUD_TTOTAL_TIMEOUT_S = 240.0
REDEPLOY_TIMEOUT_S = 300.0
CLOUD_PEAK_RPS = 1.0
CLOUD_TROUGH_RPS = 0.2


class CloudRunError(TtsBenchError):
    """A step of the main job failed; the message names the step."""


@dataclass(frozen=True, slots=True)
class CloudRunSettings:
    out: Path
    schedule: LadderSchedule
    corpus_path: Path
    utterances: Sequence[Utterance]
    slo_ms: float | None  # None: calibrate
    stack: str = "dev"
    program_dir: Path | None = None
    server_args: Sequence[str] = ()
    peak_rps: float = CLOUD_PEAK_RPS
    trough_rps: float = CLOUD_TROUGH_RPS
    model: str = "kokoro-82m"
    provision_delay_s: float = 0.0
    probe_users: int = CLOUD_PROBE_USERS
    bound_rung: int = CLOUD_BOUND_RUNG
    recovery_factor: float = CLOUD_RECOVERY_FACTOR
    recovery_hold_s: float = CLOUD_RECOVERY_HOLD_S
    warmup_s: float = CLOUD_WARMUP_S
    stretch_windows: bool = True  # longer windows when this machine serves slower


@dataclass(frozen=True, slots=True)
class CloudRunResult:
    endpoint: str
    qmax_path: Path
    ttotal_path: Path | None
    plan_path: Path | None
    plan_exit_code: int
    validation: tuple[Comparison, ...]
    pngs: tuple[Path, ...]
    slo_ms: float
    slo_reason: str
    q_max: int | None
    bracketed: bool
    measured_total_s: float | None
    elapsed_s: float
    surge_path: Path | None = None

    @property
    def validated(self) -> bool:
        return bool(self.validation) and all(c.ok for c in self.validation)


@contextlib.contextmanager
def aws_environment(env: dict[str, str]) -> Iterator[None]:
    """This process's AWS settings replaced by `env` (and no profile) for the block."""
    names = set(env) | {"AWS_PROFILE", "AWS_DEFAULT_PROFILE"}
    saved = {name: os.environ.get(name) for name in names}
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def calibrate_stream(
    session: AwsSession,
    endpoint: str,
    variant: str,
    utterances: Sequence[Utterance],
    say: Callable[[str], None],
) -> list[ProbeSample]:
    """A few one-at-a-time requests over response-stream, spread over the corpus."""
    probe = StreamProbe(runtime_client(session.region, 1), endpoint, variant, utterances, 1)
    step = max(1, len(utterances) // CALIBRATION_REQUESTS)
    out = []
    for i in range(CALIBRATION_REQUESTS):
        sample = probe.one(utterances[(i * step) % len(utterances)])
        if sample.ttfab_ms is None or sample.latency_ms is None:
            why = probe.failures[-1] if probe.failures else "no audio"
            raise CloudRunError(f"calibration request {i + 1} failed: {why}")
        out.append(sample)
        say(
            f"calibration {i + 1}/{CALIBRATION_REQUESTS}: TTFAB {sample.ttfab_ms:.0f} ms, "
            f"latency {sample.latency_ms:.0f} ms"
        )
    return out


def stretched(schedule: LadderSchedule, latency_ms: Sequence[float]) -> LadderSchedule:
    """The schedule with each window long enough for a few requests at c=1 on this machine
    (a loaded machine serves slower; a window that no request finishes measures nothing)."""
    measure_s = max(schedule.measure_s, MIN_REQUESTS_PER_WINDOW * max(latency_ms) / 1000)
    hold_s = max(schedule.hold_s, measure_s + (schedule.hold_s - schedule.measure_s))
    return replace(schedule, hold_s=round(hold_s), measure_s=round(measure_s))


def redeploy_with_plan(cloud: Any, plan: PlanArtifact, plans_dir: Path) -> None:
    """The local stand-in for `pulumi up` after a new plan: the program recorded again with the
    plans folder and the stack's SLO and plan rule set to the plan's (a local SLO is this machine's). The
    local cloud pins the image to the local digest and marks the stack `localCloud` itself, so
    the emulated plan gates this deploy and no other."""
    overrides = {
        **cloud.settings.stack_overrides, "sloMs": plan.inputs.slo_ms, "planRule": plan.rule,
    }  # fmt: skip
    # `deploy` records the program with the settings' overrides; a new plan needs a new SLO.
    cloud.settings = replace(cloud.settings, stack_overrides=overrides)
    cloud.deploy(plans_dir=plans_dir)


def force_desired_ttotal(
    session: AwsSession,
    settings: CloudRunSettings,
    qmax_path: Path,
    cloud: Any,
    step: Callable[[str], None],
) -> tuple[TtotalArtifact, Path]:
    """ttotal force-desired: a probe of `probe_users`, judged against the bound rung."""
    bound, users = settings.bound_rung, settings.probe_users
    step(f"ttotal force-desired: probe of {users} users, judged against the c={bound} rung")
    ttotal = measure_sagemaker_ttotal(
        session,
        SageMakerTtotalRequest(
            qmax_path=qmax_path, endpoint=cloud.endpoint_name, variant=cloud.variant_name,
            model=settings.model, utterances=settings.utterances, probe_concurrency=users,
            bound_rung=bound, recovery_factor=settings.recovery_factor,
            recovery_hold_s=settings.recovery_hold_s, warmup_s=settings.warmup_s,
            timeout_s=CLOUD_TTOTAL_TIMEOUT_S,
        ),
        lambda line: step(f"ttotal: {line}"),
    )  # fmt: skip
    fingerprint = load_artifact(qmax_path, QmaxArtifact).fingerprint
    if fingerprint is None:
        raise CloudRunError(f"{qmax_path}: the ladder has no fingerprint")
    name = ttotal_filename(fingerprint, Trigger.FORCE_DESIRED.value, ttotal.provenance.kind)
    path = write_artifact(ttotal, settings.out, name)
    step(f"T_total {ttotal.measured_total_s:.1f} s measured: {path}")
    return ttotal, path


def endpoint_surge_check(
    session: AwsSession,
    settings: CloudRunSettings,
    qmax_path: Path,
    endpoint: str,
    variant: str,
    step: Callable[[str], None],
) -> Path | None:
    """Issue 16's surge check on the endpoint the plan was deployed to (bounded at Q_max): two
    open-loop rates over response-stream, one instance; how close the birth–death model came.
    A check beside the plan: its failure is reported and loses nothing above."""
    step("surge check: open-loop Poisson arrivals over response-stream, one instance at Q_max")
    try:
        written = local_surge_check(
            qmax_path, settings.utterances, settings.out, step,
            endpoint=SurgeEndpoint(session, endpoint, variant, settings.model),
        )  # fmt: skip
    except TtsBenchError as exc:
        step(f"surge check failed: {exc}")
        return None
    return written.path if written else None


def plan_and_redeploy(
    session: AwsSession,
    settings: CloudRunSettings,
    cloud: Any,
    qmax_path: Path,
    ttotal_path: Path,
    slo_ms: float,
    stack: StackConfig,
    step: Callable[[str], None],
    say: Callable[[str], None],
) -> tuple[Path, int, tuple[Comparison, ...]]:
    """plan; when feasible, deploy again with it and validate what was deployed."""
    written = plan_from_files(
        qmax_path,
        ttotal_path,
        PlanRequest(
            peak_rps=settings.peak_rps,
            trough_rps=settings.trough_rps,
            slo_ms=slo_ms,
            surge_ratio=stack.surge_ratio,
        ),
        settings.out,
    )
    say(render_plan(written.plan, written.qmax, written.ttotal))
    step(f"plan written: {written.path}")
    if not written.plan.feasible:
        step("no redeploy: the plan is infeasible, so the stack would deploy no scaling")
        return written.path, 1, ()
    step("deploying again from the preview with the new plan")
    redeploy_with_plan(cloud, written.plan, settings.out)
    cloud.wait_in_service(timeout_s=REDEPLOY_TIMEOUT_S)
    validation = tuple(
        read_and_compare(
            session, cloud.endpoint_name, written.plan, stack.bounds, cloud.variant_name
        )
    )
    bad = [c for c in validation if not c.ok]
    step(
        f"validate: all {len(validation)} settings match plan {written.plan.plan_id}"
        if not bad
        else f"validate: {len(bad)} settings differ: " + ", ".join(c.setting.value for c in bad)
    )
    return written.path, 0, validation


def run_through_local_cloud(
    settings: CloudRunSettings, say: Callable[[str], None]
) -> CloudRunResult:
    from tts_bench.local_cloud import LocalCloudSettings, local_cloud
    from tts_bench.measure.ladder_locust import REPO_ROOT
    from tts_bench.measure.plots import plot_qmax, plot_ttotal

    began = time.time()

    def step(text: str) -> None:
        say(f"[{format_duration(time.time() - began):>10}] {text}")

    program_dir = settings.program_dir or REPO_ROOT
    stack = StackConfig.parse(
        program_config(stack_values(program_dir, settings.stack), project_name(program_dir))
    )
    settings.out.mkdir(parents=True, exist_ok=True)
    # A first deploy has nothing measured yet: no plan, so no scaling and no queue bound.
    no_plans = Path(tempfile.mkdtemp(prefix="tts-bench-no-plans-"))
    cloud_settings = LocalCloudSettings(
        stack=settings.stack,
        instances=1,
        provision_delay_s=settings.provision_delay_s,
        program_dir=program_dir,
        server_args=tuple(settings.server_args),
        stack_overrides={"measurementsDir": str(no_plans)},
    )
    step(f"starting the local cloud (stack {settings.stack}, deployed without a plan)")
    with local_cloud(cloud_settings, say=step) as cloud, aws_environment(cloud.env):
        endpoint, variant = cloud.endpoint_name, cloud.variant_name
        session = AwsSession.from_environment()
        step(f"endpoint {endpoint} InService; AWS clients point at {cloud.env['AWS_ENDPOINT_URL']}")

        report = read_and_check(session, endpoint, variant=variant)
        if report.errors:
            first = report.errors[0]
            raise CloudRunError(f"drift: {first.rule.value}: {first.resource}: {first.message}")
        step(f"preflight-ok endpoint={endpoint} variant={variant} region={session.region}")

        calibration = calibrate_stream(session, endpoint, variant, settings.utterances, step)
        if settings.slo_ms is not None:
            slo_ms, reason = settings.slo_ms, "given with --slo-ms"
        else:
            ttfab = [s.ttfab_ms for s in calibration if s.ttfab_ms is not None]
            slo_ms = calibrated_slo_ms(ttfab)
            reason = (
                f"{SLO_MULTIPLE:g} × the endpoint's uncontended p95 TTFAB "
                f"({np.percentile(ttfab, 95):.0f} ms over {len(ttfab)} requests), rounded up"
            )
        step(f"local SLO: p95 TTFAB <= {slo_ms:g} ms ({reason})")

        schedule = settings.schedule
        if settings.stretch_windows:
            schedule = stretched(schedule, [s.latency_ms or 0.0 for s in calibration])
        step(
            f"qmax over response-stream: rungs {','.join(map(str, schedule.rungs))}, hold "
            f"{schedule.hold_s:g} s, measure {schedule.measure_s:g} s"
        )
        qmax_path = run_live_ladder(
            session,
            LiveLadderRequest(
                endpoint=endpoint, variant=variant, transport=Transport.RESPONSE_STREAM,
                schedule=schedule, slo_ms=slo_ms, model=settings.model, out=settings.out,
                corpus=settings.corpus_path, metric_wait_s=CLOUD_METRIC_WAIT_S,
                plan_surge_ratio=stack.surge_ratio,
            ),
            lambda line: step(f"qmax: {line}"),
            lambda line: step(f"qmax: {line}"),
        )  # fmt: skip
        qmax = load_artifact(qmax_path, QmaxArtifact)
        outcome = "bracketed" if qmax.bracketed else "NOT bracketed"
        step(f"Q_max {qmax.q_max} at {slo_ms:g} ms ({outcome}): {qmax_path}")

        ttotal: TtotalArtifact | None = None
        ttotal_path: Path | None = None
        plan_path, plan_code, validation = None, 2, ()
        if qmax.q_max is None:
            step(
                "ttotal and plan skipped: no rung met the SLO, so there is no Q_max to plan from "
                "and no rung to judge recovery by"
            )
        else:
            ttotal, ttotal_path = force_desired_ttotal(session, settings, qmax_path, cloud, step)
            plan_path, plan_code, validation = plan_and_redeploy(
                session, settings, cloud, qmax_path, ttotal_path, slo_ms, stack, step, say
            )
        surge_path = None
        if validation and all(c.ok for c in validation):
            surge_path = endpoint_surge_check(session, settings, qmax_path, endpoint, variant, step)
    step("local cloud stopped")
    pngs = [plot_qmax(qmax, qmax_path.with_suffix(".png"))]
    if ttotal is not None and ttotal_path is not None:
        pngs.append(plot_ttotal(ttotal, ttotal_path.with_suffix(".png")))
    step(f"plots: {', '.join(str(p) for p in pngs)}")
    return CloudRunResult(
        endpoint=endpoint, qmax_path=qmax_path, ttotal_path=ttotal_path, plan_path=plan_path,
        plan_exit_code=plan_code, validation=validation, pngs=tuple(pngs), slo_ms=slo_ms,
        slo_reason=reason, q_max=qmax.q_max, bracketed=qmax.bracketed,
        measured_total_s=ttotal.measured_total_s if ttotal else None,
        elapsed_s=time.time() - began, surge_path=surge_path,
    )  # fmt: skip
