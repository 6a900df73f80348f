"""The fleet model against the request-level reference on small cases (≤ 1 h, ≤ 50 requests/s).

Both realise the same continuous-time Markov chain: the fleet model keeps only how many
instances hold each occupancy, which is all least-outstanding routing over identical
instances depends on; the reference keeps every request. So their figures differ only by
sampling. With R independent seeds per model, the difference of the two means has standard
error sqrt(s_fleet² / R + s_requests² / R); each figure must agree within 4 of those (a false
alarm about once in 16,000), which a modelling error of even a few per cent would break on
these cases. The cases share the controller, so they also check that scaling sees the same
metric in both.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.conftest import REFERENCE_PLAN
from tests.simulate.conftest import request_for, run_policy, traffic_of
from tts_bench.simulate.from_files import Inputs, load_inputs
from tts_bench.simulate.replay import PolicyRun

SEEDS = range(8)

FLEET_PLAN = REFERENCE_PLAN.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"
CASES = [
    # fixed fleet past saturation: heavy shedding; over-SLO counted from occupancy 20 up
    ("published", "fixed:2", "steady:40", 900, 20),
    # the plan through a surge: target tracking, T_total, scale-in
    ("published", "plan", "surge:30:1.25:600", 1500, None),
    # the burst step on a short diurnal swing
    ("published", "plan+burst", "diurnal:5:50:1800", 1800, None),
    # the fleet rule: target tracking on invocations per instance (both directions) and its
    # burst, on a steep swing with a surge past the headroom
    ("fleet", "plan", "diurnal:5:60:1800+surge:1.5:600", 1800, None),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    return load_inputs(request_for(tmp_path_factory.mktemp("unused"), plan=FLEET_PLAN))


def figures(run: PolicyRun) -> dict[str, float]:
    return {
        "shed_share": run.shed / run.requests,
        "over_slo_share": run.over_slo / run.requests,
        "instance_hours": run.instance_seconds / 3600,
        "mean_occupancy": float(run.timeline.mean_occupancy.mean()),
    }


@pytest.mark.parametrize(("rule", "policy", "spec", "duration_s", "over_slo_from"), CASES)
def test_fleet_and_request_models_agree(
    reference, fleet, rule, policy, spec, duration_s, over_slo_from
) -> None:
    if rule == "fleet":
        reference = fleet
    curves = reference.curves
    if over_slo_from is not None:
        curves = replace(curves, over_slo_from=over_slo_from)
    samples: dict[str, list[dict[str, float]]] = {"fleet": [], "requests": []}
    for seed in SEEDS:
        traffic = traffic_of(spec, duration_s, reference, seed)
        for model in samples:
            run = run_policy(reference, policy, traffic, 1000 + seed, model=model, curves=curves)
            samples[model].append(figures(run))
    for name in samples["fleet"][0]:
        fleet = np.array([s[name] for s in samples["fleet"]])
        requests = np.array([s[name] for s in samples["requests"]])
        se = np.sqrt(fleet.var(ddof=1) / len(fleet) + requests.var(ddof=1) / len(requests))
        gap = abs(fleet.mean() - requests.mean())
        assert gap <= 4 * se + 1e-9, (
            f"{name}: fleet {fleet.mean():.5f} vs requests {requests.mean():.5f} (4 SE = {4 * se:.5f})"
        )
    assert any(s["shed_share"] > 0 for s in samples["fleet"]), (
        "a case that sheds nothing checks little"
    )
