"""`plan --schedule` (issue 37): the steps a day gives, computed by hand on a tiny day; their
properties on any day; the simulator applying them; custody refusing a hand-edited schedule."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import MEASUREMENTS, REFERENCE_QMAX, REFERENCE_TTOTAL
from tests.simulate.conftest import request_for, traffic_of
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import MAX_SCHEDULED_ACTIONS, PlanArtifact
from tts_bench.custody.folder import ArtifactFolder
from tts_bench.custody.gate import evaluate
from tts_bench.deployment import OperatorBounds
from tts_bench.errors import TtsBenchError
from tts_bench.planning.aws.scheduled import ScheduledAction, recurring_cron
from tts_bench.planning.deploy import scheduled_actions_of
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.gate import GateCondition, GateQuery
from tts_bench.planning.schedule.attach import with_schedule
from tts_bench.planning.schedule.day import instances_needed, unfollowable
from tts_bench.planning.schedule.steps import (
    DayFleet,
    Step,
    floor_per_minute,
    merged_steps,
    schedule_steps,
)
from tts_bench.planning.steps import PlanRequest
from tts_bench.simulate.from_files import load_inputs
from tts_bench.simulate.policies import parse_policy
from tts_bench.simulate.replay import run_fleet_model

FLEET_PLAN = MEASUREMENTS / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"
# λ_out 10 rps, surge 1.25, a lead of two minutes, 1 to 10 instances.
TINY = DayFleet(
    per_instance_rps=10.0, surge_ratio=1.25, lead_s=120.0, min_instances=1, max_instances=10
)
TINY_DAY = np.array([5.0, 5, 5, 30, 30, 30, 5, 5])


def test_a_tiny_day_by_hand() -> None:
    # Needs 1 1 1 3 3 3 1 1. A fleet of one serves 12.5 rps with its headroom; minutes 1 and 2
    # see 30 within the next two minutes: too fast. They cover minutes 2–4, which want 1 3 3;
    # a step acts two minutes ahead, so the floor is 1 3 3 3 3 1 1 1.
    assert instances_needed(TINY_DAY, 10.0).tolist() == [1, 1, 1, 3, 3, 3, 1, 1]
    assert np.flatnonzero(unfollowable(TINY_DAY, 10.0, 1.25, 2)).tolist() == [1, 2]
    assert floor_per_minute(TINY_DAY, TINY).tolist() == [1, 3, 3, 3, 3, 1, 1, 1]
    # Merging the first two runs costs 2 instance-minutes, the last two 4: over 1 % of the 14
    # the day needs, so the three runs stay three steps.
    assert schedule_steps(TINY_DAY, TINY) == [Step(0, 1), Step(1, 3), Step(5, 1)]
    # With room for 7 extra instance-minutes both merges are taken, cheapest first (2, then 4).
    need = instances_needed(TINY_DAY, 10.0)
    floor = floor_per_minute(TINY_DAY, TINY)
    assert merged_steps(floor, need, tolerance=0.5) == [Step(0, 3)]
    assert merged_steps(floor, need, tolerance=2 / 14) == [Step(0, 3), Step(5, 1)]


def test_a_day_that_repeats_holds_its_next_ramp_across_its_end() -> None:
    # Needs 3 3 1 1 1 1 1 3; the ramp at minute 7 runs on into the next period's minutes 0-1.
    # Minutes 5 and 6 see 30 within two minutes (6 sees minute 0 of the next period): too fast.
    # They cover minutes 6, 7 and, wrapping, 0, which want 1 3 3; two minutes ahead, the floor
    # is 3 1 1 1 1 3 3 3. Read as one day, nothing comes after minute 7: minute 0 wants only 1.
    day = np.array([30.0, 30, 5, 5, 5, 5, 5, 30])
    assert floor_per_minute(day, TINY, cyclic=True).tolist() == [3, 1, 1, 1, 1, 3, 3, 3]
    assert floor_per_minute(day, TINY).tolist() == [1, 1, 1, 1, 1, 3, 3, 3]
    # Merging either pair of runs costs 6 instance-minutes, past 1 % of the 14 needed.
    assert schedule_steps(day, TINY, cyclic=True) == [Step(0, 3), Step(1, 1), Step(5, 3)]


@settings(max_examples=40, deadline=None)
@given(
    rates=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=60),
    turn=st.integers(0, 59),
    hold_minutes=st.integers(0, 5),
)
def test_a_repeating_days_floor_turns_with_the_day(rates, turn, hold_minutes) -> None:
    # A day that repeats has no first minute: starting it elsewhere moves its floor alike.
    day = np.array(rates)
    fleet = replace(TINY, hold_s=60.0 * hold_minutes)
    k = turn % len(day)
    turned = floor_per_minute(np.roll(day, k), fleet, cyclic=True)
    assert turned.tolist() == np.roll(floor_per_minute(day, fleet, cyclic=True), k).tolist()


def test_a_4_h_days_steps_recur_every_4_h_in_the_plan_the_simulator_and_the_deploy(
    tmp_path,
) -> None:
    inputs = load_inputs(request_for(tmp_path, plan=FLEET_PLAN))
    rates = [10.0] * 60 + [300.0] * 20 + [10.0] * 160
    plan = with_schedule(inputs.plan, "a 4 h day", rates, period_s=14_400)
    assert plan.schedule is not None and plan.schedule.period_s == 14_400
    actions = scheduled_actions_of(plan, None, "e")
    by_time = {s.at_s: s.min_capacity for s in plan.schedule.steps}
    for step, action in zip(plan.schedule.steps, actions, strict=True):
        hours = ",".join(str(step.at_s // 3600 % 4 + 4 * k) for k in range(6))
        assert action.schedule == f"cron({step.at_s // 60 % 60} {hours} * * ? *)"
    policy = parse_policy("plan", plan, inputs.shape, inputs.curves)
    runs = policy.scheduled_runs(0.0, 86_400.0)
    # Every step's six runs of the day (00:00's is the one before it), and 00:00's the next day.
    day = [(at + k * 14_400.0, low) for at, low in by_time.items() for k in range(6) if at or k]
    assert runs == [*sorted(day), (86_400.0, by_time[0])]
    # The step at 00:00 held from the start, as the run at the day's end holds it again.
    assert policy.scheduled_min_at_start() == min(by_time[0], policy.max_instances)


def test_a_week_gets_its_weekdays_steps_by_day_of_the_week(tmp_path) -> None:
    # Each weekday the hand day (a ramp to 300 at 01:00 for 20 minutes), the weekend flat: the
    # day alone gives 1 at 00:00, 27 at 00:21 (⌈1.2 × 300 / λ_out 13.776⌉: the load a forecast
    # may be short by), 1 at 01:39; the week gives those steps on each
    # weekday, as weekly crons naming the day, and nothing on Saturday or Sunday.
    inputs = load_inputs(request_for(tmp_path, plan=FLEET_PLAN))
    day = [10.0] * 60 + [300.0] * 20 + [10.0] * 1360
    daily = with_schedule(inputs.plan, "a day", day).schedule
    assert daily is not None
    assert [(s.at_utc, s.min_capacity) for s in daily.steps] == [
        ("00:00", 1), ("00:21", 27), ("01:39", 1)
    ]  # fmt: skip
    plan = with_schedule(inputs.plan, "a week", day * 5 + [10.0] * 2880, period_s=7 * 86_400)
    assert plan.schedule is not None
    days = ("Mon", "Tue", "Wed", "Thu", "Fri")
    assert [(s.at_utc, s.min_capacity) for s in plan.schedule.steps] == [("Mon 00:00", 1)] + [
        (f"{d} {t}", low) for d in days for t, low in (("00:21", 27), ("01:39", 1))
    ]
    actions = scheduled_actions_of(plan, None, "e")
    assert (actions[3].name, actions[3].schedule) == (
        "e-AllTraffic-schedule-tue-0021", "cron(21 0 ? * TUE *)"
    )  # fmt: skip
    # The simulator's day 0 is a Monday: Friday's ramp runs on day 4, nothing on days 5 and 6.
    policy = parse_policy("plan", plan, inputs.shape, inputs.curves)
    runs = policy.scheduled_runs(0.0, 7 * 86_400.0)
    assert [(t // 86_400, t % 86_400, low) for t, low in runs][-3:] == [
        (4, 21 * 60, 27), (4, 99 * 60, 1), (7, 0, 1)
    ]  # fmt: skip


def test_a_want_is_held_either_side_of_its_minute() -> None:
    # Held two minutes: the wants 0 0 1 3 3 0 0 0 become 1 3 3 3 3 3 3 0; a lead of two
    # minutes ahead makes every minute but the last 3.
    fleet = replace(TINY, hold_s=120.0)
    assert floor_per_minute(TINY_DAY, fleet).tolist() == [3, 3, 3, 3, 3, 3, 3, 1]
    assert schedule_steps(TINY_DAY, fleet) == [Step(0, 3), Step(7, 1)]


def test_a_want_holds_the_load_a_forecast_may_be_short_by() -> None:
    # ×1.2: the covered minutes 2–4 (rates 5 30 30) want the need of 6 36 36, 1 4 4, not 1 3 3;
    # which minutes are too fast is the forecast's (1 and 2, as by hand above).
    fleet = replace(TINY, load_scale=1.2)
    assert floor_per_minute(TINY_DAY, fleet).tolist() == [1, 4, 4, 4, 4, 1, 1, 1]
    assert schedule_steps(TINY_DAY, fleet) == [Step(0, 1), Step(1, 4), Step(5, 1)]


@settings(max_examples=40, deadline=None)
@given(
    rates=st.lists(st.floats(0, 400, allow_nan=False), min_size=1, max_size=200),
    hold_minutes=st.integers(1, 40),
)
def test_a_held_floor_covers_the_unheld_one_around_each_minute(rates, hold_minutes) -> None:
    day = np.array(rates)
    plain = floor_per_minute(day, TINY)
    held = floor_per_minute(day, replace(TINY, hold_s=60.0 * hold_minutes))
    for m in range(len(day)):
        window = plain[max(0, m - hold_minutes) : m + hold_minutes + 1]
        assert held[m] >= window.max()


def test_a_day_the_rule_follows_gets_only_the_floor() -> None:
    slow = np.linspace(100, 103, 30)  # 0.1 % a minute
    assert schedule_steps(slow, TINY) == [Step(0, 1)]


def _expand(steps: list[Step], minutes: int) -> np.ndarray:
    held = np.zeros(minutes, dtype=np.int64)
    for step in steps:
        held[step.start_minute :] = step.min_capacity
    return held


@settings(max_examples=60, deadline=None)
@given(
    rates=st.lists(st.floats(0, 400, allow_nan=False), min_size=1, max_size=300),
    lead_s=st.floats(30, 900),
    surge=st.floats(1.05, 1.45),
)
def test_the_steps_hold_the_floor_within_the_bounds(rates, lead_s, surge) -> None:
    day = np.array(rates)
    fleet = replace(TINY, lead_s=lead_s, surge_ratio=surge, max_instances=30)
    steps = schedule_steps(day, fleet)
    held = _expand(steps, len(day))
    floor = floor_per_minute(day, fleet)
    assert steps[0].start_minute == 0 and len(steps) <= MAX_SCHEDULED_ACTIONS
    assert (held >= floor).all() and held.min() >= 1 and held.max() <= 30
    # The merge's extra stays within its tolerance of the day's need.
    need = instances_needed(day, fleet.per_instance_rps)
    extra = np.maximum(held, need).sum() - np.maximum(floor, need).sum()
    assert extra <= 0.01 * need.sum() + 1e-9


def test_the_simulator_scales_out_to_a_scheduled_minimum_and_keeps_the_policy(tmp_path) -> None:
    inputs = load_inputs(request_for(tmp_path, plan=FLEET_PLAN))
    policy = parse_policy("plan", inputs.plan, inputs.shape, inputs.curves)
    steps = ((0, 1), (600, 8), (900, 1))
    policy = replace(
        policy,
        schedule=tuple(
            ScheduledAction(f"s{at}", recurring_cron(at), "Etc/UTC", low, policy.max_instances)
            for at, low in steps
        ),
    )
    traffic = traffic_of("steady:5", 1500.0, inputs, seed=3)
    run = run_fleet_model(
        inputs.curves, inputs.shape, policy, traffic, inputs.throughput_at_trigger_rps,
        np.random.default_rng(3),
    )  # fmt: skip
    scheduled = [(t, a) for t, a in run.actions if a.policy == "scheduled"]
    assert [(t, a.after) for t, a in scheduled] == [(600.0, 8)]
    line = run.timeline
    during = (line.end_s >= 600) & (line.end_s < 900)
    assert (line.desired[during] >= 8).all()
    # The launched instances serve one start-up later.
    serving = line.end_s[line.in_service >= 8]
    assert serving.size and serving[0] >= 600 + inputs.shape.start_delay_s
    # A lower minimum removes nothing at once: the policy's own scale-in does, later.
    assert line.desired[np.searchsorted(line.end_s, 900.0)] >= 8


@pytest.fixture
def scheduled_plan(tmp_path: Path) -> Path:
    for source in (REFERENCE_QMAX, REFERENCE_TTOTAL):
        shutil.copy(source, tmp_path / source.name)
    request = PlanRequest(peak_rps=400, trough_rps=10, rule="fleet")
    # A day longer than its ±30 min hold, so its steps are more than one.
    rates = [10.0] * 60 + [300.0] * 20 + [10.0] * 80

    def schedule(plan, *_):  # type: ignore[no-untyped-def]
        return with_schedule(plan, "a hand-made day", rates)

    qmax, ttotal = tmp_path / REFERENCE_QMAX.name, tmp_path / REFERENCE_TTOTAL.name
    return plan_from_files(qmax, ttotal, request, tmp_path, schedule).path


def _edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_a_scheduled_plan_rederives(scheduled_plan: Path) -> None:
    plan = load_artifact(scheduled_plan, PlanArtifact)
    assert plan.schedule is not None and len(plan.schedule.steps) >= 2
    assert plan.finding("ramp_rate") is not None
    assert "re-derived from" in ArtifactFolder(scheduled_plan.parent).check(scheduled_plan).line()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            lambda d: d["schedule"]["steps"][1].update(min_capacity=2),
            "schedule.steps[1].min_capacity",
        ),
        (lambda d: d["schedule"]["steps"][1].update(at_s=0, at_utc="00:00"), "schedule.steps[1]"),
        (lambda d: d["schedule"]["minute_rps"].__setitem__(7, 30.0), "plan_id"),
    ],
    ids=["min-capacity", "time", "rates"],
)
def test_a_hand_edited_schedule_is_refused_by_verify_and_the_gate(
    scheduled_plan: Path, change, named: str
) -> None:
    _edit(scheduled_plan, change)
    with pytest.raises(TtsBenchError) as refused:
        ArtifactFolder(scheduled_plan.parent).check(scheduled_plan)
    assert named in str(refused.value)
    plan = load_artifact(scheduled_plan, PlanArtifact)
    fp = plan.fingerprint
    assert fp is not None
    result = evaluate(
        scheduled_plan.parent,
        GateQuery(model=fp.model, instance_type=fp.instance_type, image_digest=fp.image_digest,
                  bounds=OperatorBounds(min_instances=1, max_instances=40), rule="fleet"),
    )  # fmt: skip
    assert result.condition is GateCondition.NOT_REDERIVED and named in result.reason


def test_a_repeating_days_plan_rederives_and_its_period_is_in_custody(tmp_path: Path) -> None:
    for source in (REFERENCE_QMAX, REFERENCE_TTOTAL):
        shutil.copy(source, tmp_path / source.name)
    request = PlanRequest(peak_rps=400, trough_rps=10, rule="fleet")
    rates = [10.0] * 60 + [300.0] * 20 + [10.0] * 160

    def schedule(plan, *_):  # type: ignore[no-untyped-def]
        return with_schedule(plan, "a 4 h day", rates, period_s=14_400)

    qmax, ttotal = tmp_path / REFERENCE_QMAX.name, tmp_path / REFERENCE_TTOTAL.name
    path = plan_from_files(qmax, ttotal, request, tmp_path, schedule).path
    assert "re-derived from" in ArtifactFolder(tmp_path).check(path).line()
    _edit(path, lambda d: d["schedule"].update(period_s=86_400))
    with pytest.raises(TtsBenchError) as refused:
        ArtifactFolder(tmp_path).check(path)
    assert "plan_id" in str(refused.value), refused.value  # the period is hashed into the id


def test_tts_bench_verify_names_the_edited_step(scheduled_plan: Path, capsys) -> None:
    from tts_bench.cli import main

    assert main(["verify", str(scheduled_plan)]) == 0
    _edit(scheduled_plan, lambda d: d["schedule"]["steps"][1].update(min_capacity=2))
    assert main(["verify", str(scheduled_plan)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("FAIL") and "schedule.steps[1].min_capacity" in out


def test_a_plan_without_a_schedule_writes_no_schedule_field() -> None:
    assert '"schedule"' not in FLEET_PLAN.read_text(encoding="utf-8")
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    assert "schedule" not in plan.model_dump_json()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--schedule"], "--schedule is made from the day: give --traffic or --traffic-trace"),
        (["--schedule", "--traffic", "steady:5", "--rule", "published"], "needs the fleet rule"),
        (["--schedule", "--traffic", "diurnal:1:5:172800"], "does not divide a day (86400 s)"),
        (
            ["--schedule", "--traffic", "diurnal:1:5:10000"],
            "diurnal:1:5:10000 repeats every 10000 s; a period of 10000 s does not divide a day",
        ),
        (["--schedule", "--traffic", "diurnal:1:5:5400"], "neither whole hours nor a divisor"),
        (
            ["--schedule", "--traffic", "diurnal:1:5:10000+weekend:0.5"],
            "has a weekend but its days differ (a period of 10000 s does not divide a day)",
        ),
    ],
)
def test_schedule_flags_are_refused_in_one_line(capsys, tmp_path, extra, expected) -> None:
    from tts_bench.cli import main

    code = main(
        ["plan", "--qmax", str(REFERENCE_QMAX), "--ttotal", str(REFERENCE_TTOTAL),
         "--peak-rps", "40", "--seeds", "1", "--out", str(tmp_path), *extra]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and expected in err and "\n" not in err, err


def test_a_missed_forecast_moves_and_scales_the_day() -> None:
    from tts_bench.simulate.check import MissedShape
    from tts_bench.simulate.traffic import parse_synthetic

    base = parse_synthetic("diurnal:10:100:7200")
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    missed = MissedShape(**fields, shift_s=1800.0, scale=1.2)
    t = np.array([0.0, 1800.0, 3600.0, 5400.0])
    assert missed.rate_rps(t, 0.0) == pytest.approx(1.2 * base.rate_rps(t - 1800.0, 0.0))
    # The peak (at half the period) comes 30 minutes later.
    assert missed.rate_rps(np.array([5400.0]), 0.0)[0] == pytest.approx(120.0)


def test_forecast_errors_are_simulated_recorded_and_rederived(capsys, tmp_path) -> None:
    from tts_bench.cli import main

    for source in (REFERENCE_QMAX, REFERENCE_TTOTAL):
        shutil.copy(source, tmp_path / source.name)
    code = main(
        ["plan", "--qmax", str(tmp_path / REFERENCE_QMAX.name),
         "--ttotal", str(tmp_path / REFERENCE_TTOTAL.name), "--peak-rps", "60",
         "--trough-rps", "2", "--traffic", "diurnal:2:60:3600", "--schedule",
         "--forecast-errors", "--seeds", "1", "--json", "--out", str(tmp_path)]
    )  # fmt: skip
    plan = PlanArtifact.model_validate(json.loads(capsys.readouterr().out))
    check = plan.traffic_check
    assert code in (0, 1) and check is not None and check.forecast_errors is not None
    pairs = [(r.shift_s, r.scale, r.aws_semantics) for r in check.forecast_errors]
    assert pairs == [
        (shift, scale, semantics)
        for shift, scale in ((-1800.0, 1.0), (1800.0, 1.0), (0.0, 0.8), (0.0, 1.2))
        for semantics in ("documented", "pessimistic")
    ]
    assert plan.finding("forecast_error") is not None
    (path,) = tmp_path.glob("plan-*.json")
    folder = ArtifactFolder(tmp_path)
    assert "re-derived from" in folder.check(path).line()
    _edit(path, lambda d: d["traffic_check"]["forecast_errors"][0].update(shed_share=0.5))
    with pytest.raises(TtsBenchError, match=r"plan_id|forecast"):
        folder.check(path)


def test_ramp_rate_by_hand_on_the_tiny_day() -> None:
    from tts_bench.planning.schedule.ramp import ramp_rate

    found = ramp_rate(TINY_DAY, TINY, scheduled=False)
    # 1.25 per two minutes is 11.80 % a minute; minutes 1 and 2 see ×6 within two: 144.95 %.
    assert found.verdict == "warn"
    assert found.figure("follows_percent_per_minute") == pytest.approx(
        100 * (1.25**0.5 - 1), abs=1e-3
    )
    assert found.figure("faster_minutes") == 2
    assert found.figure("fastest_percent_per_minute") == pytest.approx(100 * (6**0.5 - 1), abs=1e-3)
    assert found.figure("fastest_at_fleet_size") == 1
    assert "between 00:01 and 00:03 UTC" in found.message
    assert ramp_rate(TINY_DAY, TINY, scheduled=True).verdict == "ok"
    assert ramp_rate(np.full(10, 50.0), TINY, scheduled=False).verdict == "ok"
