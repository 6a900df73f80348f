"""The main job's last step on the reference artifacts: the published plan rehearsed on curve
instances of its ladder, replayed in the simulator, and its one line. (The main job itself runs
it on its own ladder: `tts-bench local-run`; this module starts its own local cloud.)"""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest

from tests.conftest import REFERENCE_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.rehearsal import RehearsalArtifact
from tts_bench.jobs.short_rehearsal import TIME_SCALE, ramp, short_rehearsal

pytestmark = pytest.mark.slow


def test_the_published_plan_sheds_before_it_scales_out_as_its_replay_does(tmp_path: Path) -> None:
    lines: list[str] = []
    done = short_rehearsal(REFERENCE_QMAX, REFERENCE_TTOTAL, REFERENCE_PLAN, tmp_path, lines.append)
    assert done.path is not None, done.line
    artifact = RehearsalArtifact.model_validate_json(done.path.read_text())
    spec, duration, rate_scale = ramp(load_artifact(REFERENCE_PLAN, PlanArtifact))
    assert artifact.inputs.traffic == spec and artifact.inputs.duration_s == duration
    assert artifact.inputs.time_scale == TIME_SCALE and artifact.inputs.rate_scale == rate_scale
    assert artifact.provenance.kind == "emulated" and artifact.provenance.curve_modelled
    rehearsed, simulated = artifact.rehearsed, artifact.simulated
    # the same arrivals, every one answered
    assert rehearsed.totals.requests == simulated.totals.requests == artifact.inputs.arrivals
    assert rehearsed.totals.errors == 0
    # the published rule acts only on a saturated fleet: both runs shed before their scale-out
    first_out = next((a for a in rehearsed.actions if a.after > a.before), None)
    assert first_out is not None, (done.line, rehearsed.state_changes, rehearsed.totals)
    first_shed = next(w for w in rehearsed.windows if w.shed)
    assert first_out.role == "concurrency-target" and first_shed.t_s - 10 < first_out.t_s
    assert artifact.agreement.scaled_out_before_shedding is False
    assert done.line.startswith(f"rehearsal ({duration:g} s of the cloud's clock): the policy shed")
    sim_out = next(a for a in simulated.actions if a.after > a.before)
    assert abs(sim_out.t_s - first_out.t_s) < 120
    # what the rehearsal read back: the alarm's datapoints, its change to ALARM, its lag
    assert any(c.new == "ALARM" for c in rehearsed.state_changes)
    assert any(p.value > 37.5 for a in rehearsed.alarms if a.kind == "high" for p in a.points)
    assert rehearsed.actions[0].lag_s is not None and rehearsed.actions[0].lag_s >= 30
    assert artifact.agreement.desired.minutes > 0
    assert matplotlib.image.imread(done.path.with_suffix(".png")).shape[1] >= 1000
    assert done.wall_s < 90
