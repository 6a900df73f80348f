"""The ladder's control without Locust: the snapshot the shape reads, the samples' store, and the
decisions `LadderRun` takes on samples built by arithmetic."""

from __future__ import annotations

import pytest

from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.provenance import Provenance
from tts_bench.measure.ladder.run import LadderRun
from tts_bench.measure.ladder.schedule import LadderSchedule, Phase
from tts_bench.measure.ladder.state import ShapeSnapshot
from tts_bench.measure.ladder.statistics import CpuReading, build_qmax_artifact, ladder_rungs
from tts_bench.measure.ladder.store import Recorder, Store
from tts_bench.measure.playback import PlaybackTracker
from tts_bench.measure.samples import Outcome
from tts_bench.measure.transport.stream_events import StreamReading

from .synthetic import closed_loop

T0 = 1_700_000_000.0
SCHEDULE = LadderSchedule((1, 4), hold_s=20, measure_s=10, idle_s=2)
FINGERPRINT = Fingerprint(
    model="kokoro-82m", instance_type="local-test", image_digest="sha256:" + "0" * 64,
    transport=Transport.LOCAL_HTTP,
)  # fmt: skip


# --------------------------------------------------------------------------- the snapshot


@pytest.mark.parametrize(
    ("t", "users"), [(0.0, 1), (19.9, 1), (20.0, 0), (22.0, 4), (41.9, 4), (42.0, 0), (47.0, None)]
)
def test_the_snapshot_follows_the_schedule(t, users):
    phase = ShapeSnapshot(SCHEDULE).phase_at(t)
    assert (None if phase is None else phase.users) == users


def test_a_rung_held_open_stays_on_until_released():
    held = ShapeSnapshot(SCHEDULE).holding(SCHEDULE.rung_phase(0))
    assert held.phase_at(25.0).users == 1  # past its end, past the next rung's start
    assert held.holding(None).phase_at(25.0).users == 4


def test_refinement_cuts_the_coarse_schedule_then_idles_until_it_is_over():
    snapshot = ShapeSnapshot(SCHEDULE).refinement_begun(42.0).probe_added(2, 45.0)
    assert snapshot.probes == (Phase(2, 45.0, 65.0, 2),)
    assert [snapshot.phase_at(t).users for t in (43.0, 45.0, 64.9, 66.0, 500.0)] == [0, 2, 2, 0, 0]
    longer = snapshot.probe_extended(10.0)
    assert longer.held_open == longer.probes[-1] == Phase(2, 45.0, 75.0, 2)
    over = longer.holding(None).refinement_over()
    assert over.phase_at(79.9).users == 0 and over.phase_at(80.0) is None  # final drain 5 s


def test_the_snapshot_spawns_a_whole_rung_at_once():
    assert ShapeSnapshot(SCHEDULE).spawn_rate == 4.0


# --------------------------------------------------------------------------- the store


def test_a_process_drains_its_samples_to_the_store_and_the_store_knows_when_all_are_in():
    recorder = Recorder("h:1")
    recorder.told(4)
    token = recorder.opened(T0)
    heard = PlaybackTracker()
    reading = StreamReading("c", lambda: 1.0, started=0.0, heard=heard)
    reading.settle(Outcome.OK)
    sample = recorder.finished(token, reading, heard, recorder.rung)
    assert (sample.rung, sample.start, sample.latency_ms, sample.outcome) == (4, T0, 1000.0, "ok")
    still_open = recorder.opened(T0 + 5)
    store = Store()
    store.merge(recorder.drain())
    assert store.samples == [sample] and recorder.pending == []
    at = store.open_state["h:1"][0]
    assert store.reported_since(at) and not store.settled(at)  # a request started before `at`
    recorder.closed(still_open, sample)
    store.merge(recorder.drain())
    assert store.settled(at)


def test_an_empty_store_has_heard_from_nobody():
    assert not Store().settled(0.0) and not Store().reported_since(0.0)


# --------------------------------------------------------------------------- decisions


def ladder_samples() -> list:
    """c=1 fast, c=4 slow (2.5 s TTFAB), each rung closed-loop over its own hold."""
    out = closed_loop(1, T0, T0 + 20, latency_ms=500)
    return out + closed_loop(4, T0 + 22, T0 + 42, latency_ms=6250)


@pytest.fixture
def run() -> LadderRun:
    published: list[ShapeSnapshot] = []
    run = LadderRun(2000.0, T0, ShapeSnapshot(SCHEDULE), published.append, refine_pct=5.0)
    run.store.samples.extend(ladder_samples())
    run.store.cpu.extend(CpuReading("host:1", T0 + s, 0.01 * s) for s in range(0, 60))
    run.published = published  # type: ignore[attr-defined]
    return run


def test_each_rung_is_judged_on_its_window_and_shown_on_the_board(run):
    first = run.judge(1, run.rung_window(0))
    second = run.judge(4, run.rung_window(1))
    assert first.passes and not second.meets_slo and second.usable
    assert run.board[1]["status"] == "passes" and run.board[4]["status"] == "fails the SLO"
    assert run.bracket(run.rung_window(1)[1]).lo == 1  # c=1 passed, c=4 failed


def test_refinement_is_recorded_probe_by_probe_and_the_artifact_carries_it(run):
    coarse_end = run.rung_window(1)[1]
    run.begin_refinement(coarse_end)
    assert run.snapshot.refining and run.refine_ended_by == "interrupted"
    start_s = 44.0
    window = run.add_probe(2, start_s)
    assert window == (T0 + start_s + 10.0, T0 + start_s + 20.0)
    run.store.samples.extend(closed_loop(2, T0 + start_s, T0 + start_s + 20, latency_ms=1500))
    assert run.judge(2, window).passes
    run.record_probe(2, window)
    run.end_refinement("resolution")
    assert not run.snapshot.refining and run.published[-1] is run.snapshot
    artifact = run.artifact(FINGERPRINT, Provenance.now("measured", "test"), T0 + 100)
    assert artifact is not None and artifact.refinement is not None
    assert [p.rung.concurrency for p in artifact.refinement.probes] == [2]
    assert artifact.refined_q_max == 2 and artifact.q_max == 1


def test_the_artifact_is_the_ladder_statistics_of_the_closed_rungs(run):
    provenance = Provenance.now("measured", "test")
    artifact = run.artifact(FINGERPRINT, provenance, T0 + 100)
    rungs = ladder_rungs(run.store.samples, run.store.cpu, SCHEDULE, T0, 2000.0, T0 + 100)
    expected = build_qmax_artifact(rungs, FINGERPRINT, SCHEDULE, 2000.0, provenance, T0)
    assert artifact == expected
    assert run.artifact(FINGERPRINT, provenance, T0 + 5) is None  # no window closed yet


def test_a_rung_held_for_whole_minutes_ends_once_it_holds_them_and_the_next_starts_then():
    """What the conductor does before each rung: the fleet level's three minutes (planned at
    the ladder's start) end once two whole minutes of the clock lie in the hold."""
    start = 1_800_000_000.0 - 50.0  # the first rung starts 50 s before a whole minute
    schedule = LadderSchedule(
        (1, 2), 20, 10, 0, max_hold_s=180, extended_s=(160.0,), unstable_max_hold_s=20,
        whole_minutes=2,
    )  # fmt: skip
    run = LadderRun(60000.0, start, ShapeSnapshot(schedule))
    run.fit_to_minutes(0)
    assert run.snapshot.schedule.rung_hold_s(0) == 50 + 120 + 2
    assert run.snapshot.phase_at(171.9).users == 1 and run.snapshot.phase_at(172.0).users == 2
    run.fit_to_minutes(1)  # no extension planned: held as planned
    assert run.snapshot.schedule.rung_hold_s(1) == 20


def test_stopping_the_coarse_ladder_releases_its_rung_but_never_a_probe(run):
    run.hold_open(0)  # without --max-hold-s nothing is held open
    assert run.snapshot.held_open is None
    held = LadderRun(2000.0, T0, ShapeSnapshot(LadderSchedule((1, 4), 20, 10, 2, max_hold_s=30)))
    held.hold_open(1)
    held.release_coarse()
    assert held.snapshot.held_open is None
    held.begin_refinement(T0 + 42.0)
    held.add_probe(2, 44.0)
    assert held.snapshot.held_open is not None
    held.release_coarse()
    assert held.snapshot.held_open is not None  # the probe's verdict is not the coarse ladder's
