"""The plan gate at the program's edge: apply `tts_bench.custody.gate` and say why, in the log."""

from __future__ import annotations

from pathlib import Path

import pulumi

from tts_bench.custody.gate import evaluate
from tts_bench.planning.gate import GateQuery, GateResult


def gate_scaling(measurements_dir: Path, query: GateQuery) -> GateResult:
    """Decide whether autoscaling and observability exist; log the decision and its reason."""
    result = evaluate(measurements_dir, query)
    for complaint in result.unreadable:
        pulumi.log.warn(f"plan gate: skipped an unreadable plan: {complaint}")
    if result.enabled:
        pulumi.log.info(f"plan gate: autoscaling enabled: {result.reason}")
        if result.peak_unreachable and result.plan is not None:
            pulumi.log.warn(
                f"plan gate: the plan needs up to {result.plan.max_instances} instances at peak but "
                f"maxInstances is {query.bounds.max_instances}: the planned peak is unreachable"
            )
    else:
        pulumi.log.warn(
            f"plan gate: autoscaling and its alarms are NOT created ({result.condition.value}): "
            f"{result.reason}"
        )
    return result
