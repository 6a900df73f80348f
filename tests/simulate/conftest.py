"""The reference artifacts loaded once, and small helpers to run one policy in either model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REFERENCE_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL
from tts_bench.simulate.from_files import Inputs, SimulationRequest, load_inputs
from tts_bench.simulate.policies import parse_policy
from tts_bench.simulate.replay import PolicyRun, run_fleet_model, run_request_model
from tts_bench.simulate.service import ServiceCurves
from tts_bench.simulate.traffic import Traffic, parse_synthetic, synthetic_traffic


def request_for(out: Path, **overrides: object) -> SimulationRequest:
    fields: dict[str, object] = {
        "plan": REFERENCE_PLAN,
        "qmax": REFERENCE_QMAX,
        "ttotal": REFERENCE_TTOTAL,
        "trace": None,
        "synthetic": "steady:20",
        "duration_s": 120.0,
        "policies": ("plan",),
        "seed": 1,
        "price_per_hour_usd": None,
        "out": out,
    }
    fields.update(overrides)
    return SimulationRequest(**fields)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    return load_inputs(request_for(tmp_path_factory.mktemp("unused")))


def traffic_of(spec: str, duration_s: float, inputs: Inputs, seed: int) -> Traffic:
    rng = np.random.default_rng(seed)
    return synthetic_traffic(parse_synthetic(spec), duration_s, inputs.shape.surge_hold_s, rng)


def run_policy(
    inputs: Inputs,
    policy: str,
    traffic: Traffic,
    seed: int,
    *,
    model: str = "fleet",
    curves: ServiceCurves | None = None,
) -> PolicyRun:
    curves = curves or inputs.curves
    shape = replace(inputs.shape, queue_max_depth=curves.queue_max_depth)
    chosen = parse_policy(policy, inputs.plan, shape, curves)
    runner = run_fleet_model if model == "fleet" else run_request_model
    rng = np.random.default_rng(seed)
    return runner(curves, shape, chosen, traffic, inputs.throughput_at_trigger_rps, rng)
