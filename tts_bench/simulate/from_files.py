"""A simulation from files: load and check the artifacts, build the traffic, run, write.

The one path from the command line's arguments to a written simulation artifact and its PNG.
Refusals are one-line `TtsBenchError`s raised before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts_bench.artifacts.files import load_artifact, sha256_file, write_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.simulation import (
    AwsSemanticsRecord,
    InputFile,
    SimulationArtifact,
    SimulationInputs,
)
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import RefusalError, TtsBenchError
from tts_bench.planning.aws.semantics import DOCUMENTED, AwsSemantics
from tts_bench.planning.plan import derive_plan
from tts_bench.planning.steps import request_of
from tts_bench.simulate.deploy_shape import ScalingShape, scaling_shape
from tts_bench.simulate.oracle import OracleFleet, oracle_fleet
from tts_bench.simulate.outcome import policy_outcome
from tts_bench.simulate.plot import plot_timeline
from tts_bench.simulate.policies import Policy, parse_policy
from tts_bench.simulate.replay import PolicyRun, run_fleet_model
from tts_bench.simulate.service import ServiceCurves, service_curves
from tts_bench.simulate.traffic import (
    Traffic,
    check_duration,
    load_trace,
    parse_synthetic,
    synthetic_traffic,
)

# A month of a million instances at this price is 7e17 USD: finite in the artifact's JSON.
MAX_PRICE_PER_HOUR = 1e9
OVER_SLO_RULE = (
    "an admitted request is over the SLO when the ladder's p95 TTFAB at the occupancy it joins "
    "(itself included), interpolated between rungs, exceeds the SLO"
)


@dataclass(frozen=True)
class SimulationRequest:
    plan: Path
    qmax: Path
    ttotal: Path
    trace: Path | None
    synthetic: str | None
    duration_s: float | None
    policies: tuple[str, ...]
    seed: int
    price_per_hour_usd: float | None
    out: Path
    command: str | None = None
    semantics: AwsSemantics = DOCUMENTED


@dataclass(frozen=True)
class Simulation:
    artifact: SimulationArtifact
    path: Path
    plot: Path
    runs: list[PolicyRun]
    oracle: OracleFleet | None = None  # None: the fleet rule gives no levels for these inputs


@dataclass(frozen=True)
class Inputs:
    plan: PlanArtifact
    qmax: QmaxArtifact
    ttotal: TtotalArtifact
    shape: ScalingShape
    curves: ServiceCurves
    throughput_at_trigger_rps: float  # per instance, as the plan sizes the fleet


def check_pairing(
    plan: PlanArtifact, qmax: QmaxArtifact, ttotal: TtotalArtifact, paths: SimulationRequest
) -> None:
    """Plan, ladder and scale-out must describe one build, and the plan must come from these two."""
    named = {"plan": plan.fingerprint, "qmax": qmax.fingerprint, "ttotal": ttotal.fingerprint}
    for name, fp in named.items():
        if fp is None:
            raise RefusalError(
                f"the {name} artifact has no fingerprint; simulate only measured builds"
            )
    for name in ("qmax", "ttotal"):
        diffs = plan.fingerprint.differences(named[name])  # type: ignore[union-attr, arg-type]
        if diffs:
            raise RefusalError(
                f"plan and {name} fingerprints differ ({'; '.join(diffs)}); simulate a plan with the artifacts it was derived from"
            )
    for name, path in (("qmax", paths.qmax), ("ttotal", paths.ttotal)):
        source = plan.sources.get(name)  # type: ignore[call-overload]
        if source is not None and source.sha256 != sha256_file(path):
            raise RefusalError(
                f"{path} is not the {name} artifact the plan was derived from (sha256 differs); "
                "re-derive the plan with tts-bench plan"
            )


def load_inputs(request: SimulationRequest) -> Inputs:
    plan = load_artifact(request.plan, PlanArtifact)
    qmax = load_artifact(request.qmax, QmaxArtifact)
    ttotal = load_artifact(request.ttotal, TtotalArtifact)
    check_pairing(plan, qmax, ttotal, request)
    shape = scaling_shape(plan, request.semantics)
    curves = service_curves(qmax, shape.queue_max_depth)
    return Inputs(plan, qmax, ttotal, shape, curves, shape.sizing_rps)


def oracle_for(inputs: Inputs, traffic: Traffic) -> OracleFleet | None:
    """The clairvoyant fleet at the fleet rule's λ_out and planned T_total: the plan's own
    levels, or, for a published-rule plan, those the fleet rule derives from the same inputs;
    None when the fleet rule refuses them."""
    levels = inputs.plan.fleet
    if levels is None:
        request = request_of(inputs.plan.inputs, "fleet")
        try:
            twin = derive_plan(inputs.qmax, inputs.ttotal, request, dict(inputs.plan.sources))
        except TtsBenchError:
            return None
        levels = twin.fleet
    if levels is None:
        return None
    return oracle_fleet(traffic, levels.scale_out_rps, levels.planned_total_s)


def build_traffic(
    request: SimulationRequest, shape: ScalingShape, rng: np.random.Generator
) -> Traffic:
    if (request.trace is None) == (request.synthetic is None):
        raise TtsBenchError("give exactly one of --trace FILE and --synthetic SPEC")
    if request.duration_s is not None and request.duration_s <= 0:
        raise TtsBenchError(f"--duration-s {request.duration_s:g} must be positive")
    if request.duration_s is not None:
        check_duration(request.duration_s)
    if request.trace is not None:
        return load_trace(request.trace, request.duration_s)
    synthetic = parse_synthetic(request.synthetic)  # type: ignore[arg-type]
    duration = request.duration_s or synthetic.default_duration_s(shape.surge_hold_s)
    return synthetic_traffic(synthetic, duration, shape.surge_hold_s, rng)


def simulation_filename(artifact: SimulationArtifact) -> str:
    """`simulate-<model>-<slug>-<8 hex of the inputs>.json`: one file per distinct run."""
    digest = hashlib.sha256(
        json.dumps(artifact.inputs.model_dump(mode="json"), sort_keys=True).encode()
    ).hexdigest()[:8]
    fp = artifact.fingerprint
    stem = f"simulate-{fp.model}-{fp.slug}" if fp else "simulate-unfingerprinted"
    return f"{stem}-{digest}.json"


def simulate_from_files(request: SimulationRequest) -> Simulation:
    inputs = load_inputs(request)
    policies: list[Policy] = [
        parse_policy(name, inputs.plan, inputs.shape, inputs.curves) for name in request.policies
    ]
    if len({p.name for p in policies}) != len(policies):
        raise TtsBenchError("each --policy may be given once")
    if request.price_per_hour_usd is not None and request.price_per_hour_usd < 0:
        raise TtsBenchError("--price-per-hour must not be negative")
    if request.price_per_hour_usd is not None and request.price_per_hour_usd > MAX_PRICE_PER_HOUR:
        raise TtsBenchError(
            f"--price-per-hour {request.price_per_hour_usd:g}: at most {MAX_PRICE_PER_HOUR:g} "
            "USD per instance-hour (the cost must stay a finite number)"
        )
    if request.seed < 0:
        raise TtsBenchError(f"--seed {request.seed}: give 0 or more")
    rng = np.random.default_rng(request.seed)
    traffic = build_traffic(request, inputs.shape, rng)
    runs = [
        run_fleet_model(
            inputs.curves, inputs.shape, policy, traffic, inputs.throughput_at_trigger_rps, child
        )
        for policy, child in zip(policies, rng.spawn(len(policies)), strict=True)
    ]
    files = {
        name: InputFile(path=str(path), sha256=sha256_file(path))
        for name, path in (
            ("plan", request.plan),
            ("qmax", request.qmax),
            ("ttotal", request.ttotal),
            ("trace", request.trace),
        )
        if path is not None
    }
    oracle = oracle_for(inputs, traffic)
    artifact = SimulationArtifact(
        fingerprint=inputs.plan.fingerprint,
        policies=[policy_outcome(run, request.price_per_hour_usd) for run in runs],
        inputs=SimulationInputs(
            traffic=request.synthetic or traffic.description,
            duration_s=traffic.duration_s,
            seed=request.seed,
            price_per_hour_usd=request.price_per_hour_usd,
            model="fleet",
            over_slo_rule=OVER_SLO_RULE,
            plan_id=inputs.plan.plan_id,
            files=files,
            aws_semantics=AwsSemanticsRecord(**request.semantics.record()),
        ),
        oracle_instance_hours=round(oracle.instance_hours, 3) if oracle else None,
        provenance=Provenance.now(
            "simulated",
            source=f"plan {inputs.plan.plan_id} over {request.synthetic or traffic.description}",
            command=request.command,
            notes="fleet model (tts_bench.simulate.fleet), checked against the request-level model",
        ),
    )
    path = write_artifact(artifact, request.out, simulation_filename(artifact))
    fp = inputs.plan.fingerprint
    title = (
        f"{artifact.inputs.traffic} · plan {inputs.plan.plan_id}"
        + (f" · {fp.model} {fp.instance_type}" if fp else "")
        + f" · seed {request.seed} · AWS {request.semantics.name} (simulated)"
    )
    png = plot_timeline(
        runs, inputs.plan.c_scale_max, inputs.shape.queue_max_depth, title, path.with_suffix(".png")
    )
    return Simulation(artifact, path, png, runs, oracle)
