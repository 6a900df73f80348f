"""Freeze and restore of a variant's scaling, on every exit path, and `tts-bench thaw`."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.aws.emulated import ENDPOINT, EmulatedAws
from tests.conftest import REPO
from tts_bench.aws.freeze import (
    FreezeError,
    FreezeRecords,
    apply_freeze,
    frozen_scaling,
    read_prior_state,
)
from tts_bench.aws.session import AwsSession
from tts_bench.cli import main
from tts_bench.errors import RefusalError

CHILD = Path(__file__).with_name("freeze_child.py")
PRIOR = {"min": 1, "max": 4, "suspended": [], "desired": 2}
FROZEN = {
    "min": 1,
    "max": 1,
    "suspended": [
        "DynamicScalingInSuspended",
        "DynamicScalingOutSuspended",
        "ScheduledScalingSuspended",
    ],
    "desired": 1,
}


@pytest.fixture
def scaled(aws: EmulatedAws) -> EmulatedAws:
    """An endpoint at 2 instances with scaling active between 1 and 4."""
    aws.endpoint(instances=2)
    aws.target(min_capacity=1, max_capacity=4)
    assert aws.scaling() == PRIOR
    return aws


@pytest.fixture
def records(aws: EmulatedAws) -> FreezeRecords:
    return FreezeRecords(aws.state_dir / "freeze")


def quiet(_line: str) -> None:
    """Progress lines are for people; these tests read the emulator instead."""


def test_the_block_runs_frozen_and_a_normal_end_restores(
    scaled: EmulatedAws, records: FreezeRecords
) -> None:
    with frozen_scaling(AwsSession.from_environment(), ENDPOINT, log=quiet) as record:
        assert scaled.scaling() == FROZEN
        assert records.load(record.region, ENDPOINT, record.variant) == record
    assert scaled.scaling() == PRIOR
    assert list(records.directory.iterdir()) == []


def test_an_exception_restores_and_still_propagates(
    scaled: EmulatedAws, records: FreezeRecords
) -> None:
    with (
        pytest.raises(ZeroDivisionError),
        frozen_scaling(AwsSession.from_environment(), ENDPOINT, log=quiet),
    ):
        assert scaled.scaling() == FROZEN
        _ = 1 / 0
    assert scaled.scaling() == PRIOR


def test_a_prior_suspension_is_restored_as_it_was(scaled: EmulatedAws) -> None:
    scaled.target(suspended={"ScheduledScalingSuspended": True})
    with frozen_scaling(AwsSession.from_environment(), ENDPOINT, log=quiet):
        assert scaled.scaling() == FROZEN
    assert scaled.scaling() == PRIOR | {"suspended": ["ScheduledScalingSuspended"]}


def test_a_variant_without_scaling_only_has_its_count_pinned(aws: EmulatedAws) -> None:
    aws.endpoint(instances=3)
    with frozen_scaling(AwsSession.from_environment(), ENDPOINT, log=quiet):
        assert aws.scaling() == {"min": None, "max": None, "suspended": [], "desired": 1}
    assert aws.scaling()["desired"] == 3


def test_an_unrestored_freeze_refuses_a_second_one(scaled: EmulatedAws) -> None:
    session = AwsSession.from_environment()
    records = FreezeRecords.default()
    records.save(read_prior_state(session, ENDPOINT, "AllTraffic"))
    with (
        pytest.raises(RefusalError, match=f"run `tts-bench thaw --endpoint {ENDPOINT}` first"),
        frozen_scaling(session, ENDPOINT, log=quiet),
    ):
        pass
    assert scaled.scaling() == PRIOR  # nothing was changed


@pytest.fixture
def child(scaled: EmulatedAws) -> Iterator[subprocess.Popen[str]]:
    """A process that froze the endpoint's scaling and now waits; killed if a test leaves it."""
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    }
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), ENDPOINT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""  # type: ignore[union-attr]
        assert line == "frozen\n", proc.stderr.read() if proc.poll() is not None else "no answer"  # type: ignore[union-attr]
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)]
)
def test_a_signalled_measurement_restores_the_prior_state(
    scaled: EmulatedAws, child: subprocess.Popen[str], signum: int, exit_code: int
) -> None:
    assert scaled.scaling() == FROZEN
    child.send_signal(signum)
    assert child.wait(timeout=60) == exit_code
    assert scaled.scaling() == PRIOR
    assert list((scaled.state_dir / "freeze").iterdir()) == []
    assert "restored" in child.stderr.read()  # type: ignore[union-attr]


@pytest.mark.slow
def test_thaw_restores_what_a_killed_measurement_recorded(
    scaled: EmulatedAws, child: subprocess.Popen[str], capsys
) -> None:
    child.kill()  # SIGKILL: no cleanup runs, the record stays behind
    child.wait(timeout=30)
    assert scaled.scaling() == FROZEN
    assert main(["thaw", "--endpoint", ENDPOINT]) == 0
    assert scaled.scaling() == PRIOR
    assert "restored from its freeze record" in capsys.readouterr().out


def test_thaw_without_a_record_unsuspends_and_leaves_min_max(scaled: EmulatedAws, capsys) -> None:
    session = AwsSession.from_environment()
    apply_freeze(session, read_prior_state(session, ENDPOINT, "AllTraffic"), log=quiet)
    assert scaled.scaling() == FROZEN  # frozen, and no record was ever written
    for _ in range(2):  # safe to run twice
        assert main(["thaw", "--endpoint", ENDPOINT]) == 0
        assert scaled.scaling() == FROZEN | {"suspended": []}
        assert "not suspended (no freeze record); min 1, max 1" in capsys.readouterr().out


def test_thaw_of_a_variant_without_scaling_has_nothing_to_do(aws: EmulatedAws, capsys) -> None:
    aws.endpoint()
    assert main(["thaw", "--endpoint", ENDPOINT]) == 0
    assert "has no scalable target; nothing is suspended" in capsys.readouterr().out


def test_thaw_drops_the_record_of_an_endpoint_that_is_gone(scaled: EmulatedAws, capsys) -> None:
    session = AwsSession.from_environment()
    records = FreezeRecords.default()
    records.save(read_prior_state(session, ENDPOINT, "AllTraffic"))
    scaled.client("sagemaker").delete_endpoint(EndpointName=ENDPOINT)
    assert main(["thaw", "--endpoint", ENDPOINT]) == 2
    assert (
        "no longer exists in us-east-1, so there is nothing to restore" in capsys.readouterr().err
    )
    assert list(records.directory.iterdir()) == []


def test_an_unwritable_record_changes_nothing(
    scaled: EmulatedAws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TTS_BENCH_STATE_DIR", str(blocker))
    with (
        pytest.raises(FreezeError, match=r"freeze record .* set TTS_BENCH_STATE_DIR to a writable"),
        frozen_scaling(AwsSession.from_environment(), ENDPOINT, log=quiet),
    ):
        pass
    assert scaled.scaling() == PRIOR


def _put_at(aws: EmulatedAws, name: str, when: datetime, low: int) -> None:
    aws.client("application-autoscaling").put_scheduled_action(
        ServiceNamespace="sagemaker",
        ResourceId="endpoint/speech-kokoro-82m/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        ScheduledActionName=name,
        Schedule=f"at({when:%Y-%m-%dT%H:%M:%S})",
        Timezone="UTC",
        ScalableTargetAction={"MinCapacity": low, "MaxCapacity": 4},
    )


def test_a_scheduled_action_due_while_frozen_is_held_after_the_restore(
    scaled: EmulatedAws, records: FreezeRecords
) -> None:
    """AWS skips a scheduled action due while scheduled scaling is suspended: the restore puts
    back the min it would have set (and the count within it), not the recorded min; one not
    yet due changes nothing."""
    lines: list[str] = []
    with frozen_scaling(AwsSession.from_environment(), ENDPOINT, log=lines.append) as record:
        due_at = record.frozen_at + timedelta(seconds=1)
        _put_at(scaled, "morning", due_at, 3)
        _put_at(scaled, "tomorrow", due_at + timedelta(days=1), 4)
        time.sleep(max(0.0, due_at.timestamp() - time.time() + 0.1))
    assert scaled.scaling() == {**PRIOR, "min": 3, "desired": 3}
    assert any("did not run (morning)" in line for line in lines), lines


def test_a_schedule_suspended_before_the_freeze_stays_as_recorded(
    scaled: EmulatedAws, records: FreezeRecords
) -> None:
    scaled.target(suspended={"ScheduledScalingSuspended": True})
    with frozen_scaling(AwsSession.from_environment(), ENDPOINT, log=quiet) as record:
        due_at = record.frozen_at + timedelta(seconds=1)
        _put_at(scaled, "morning", due_at, 3)
        time.sleep(max(0.0, due_at.timestamp() - time.time() + 0.1))
    assert scaled.scaling() == {**PRIOR, "suspended": ["ScheduledScalingSuspended"]}
