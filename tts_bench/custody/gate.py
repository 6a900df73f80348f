"""The measured-plan gate with custody: what the Pulumi program and the policy pack apply.

First the selection (`planning.gate.select_plan`: bounds, model, image, env, emulation, rule,
one plan, inputs, feasibility). A plan it would enable must then follow from its sources: they
lie in the same folder by sha256 and check against their raw data, and the plan re-derived
from them equals it field for field (`custody.plans.check_plan`). Any missing source or
difference is `GateCondition.NOT_REDERIVED`, naming the file, the field and both values: the
program creates no autoscaling, and the pack reports a mandatory violation.
"""

from __future__ import annotations

import os
from pathlib import Path

from tts_bench.custody.folder import ArtifactFolder
from tts_bench.errors import TtsBenchError
from tts_bench.planning.gate import GateCondition, GateQuery, GateResult, select_plan


def evaluate(folder: str | os.PathLike[str], query: GateQuery) -> GateResult:
    """The gate over the plans in `folder`: selected, then re-derived from their sources."""
    result = select_plan(folder, query)
    if not result.enabled or result.plan is None or result.plan_path is None:
        return result
    path = Path(result.plan_path)
    try:
        ArtifactFolder(path.parent).check(path)
    except TtsBenchError as exc:
        return GateResult(
            condition=GateCondition.NOT_REDERIVED,
            reason=(
                f"plan {result.plan.plan_id} ({path.name}) does not follow from its sources: "
                f"{str(exc).removeprefix(f'{path}: ')}"
            ),
            plan=result.plan,
            plan_path=result.plan_path,
            unreadable=result.unreadable,
        )
    return result
