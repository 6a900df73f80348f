"""The record of a run's instance processes, so that a local cloud killed before it could stop
them (SIGKILL) leaves what the next start needs to stop them.

Instance processes run in sessions of their own (a Ctrl-C in the terminal must not reach them
before the cloud drains them), so nothing stops them when their cloud dies. Each run keeps
`instances.json` in its private run folder (`private_files`): its own pid and start time, and
those of every instance process still running, rewritten atomically on each change:

    {"owner": {"pid": 812, "start_ticks": 90211}, "instances": [{"pid": 830, "start_ticks": 90377}]}

A process is named by its pid and its start time (`/proc/<pid>/stat`, clock ticks since boot),
so a pid that another process took since is never signalled, and a run whose pid was reused
still counts as gone. Where `/proc` is missing, start times are unknown and nothing is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

RECORD_NAME = "instances.json"
TERM_WAIT_S = 10.0  # an orphan serves nobody: its drain is quick, past this it is killed


@dataclass(frozen=True, slots=True)
class RecordedProcess:
    pid: int
    start_ticks: int


def process_start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot); None if it is gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    if fields[0] in ("Z", "X"):  # exited, waiting to be reaped: gone for our purposes
        return None
    return int(fields[19])  # field 22 of proc(5); fields[0] is field 3


def running(process: RecordedProcess) -> bool:
    """Whether this very process (not a later one with its pid) still runs."""
    return process_start_ticks(process.pid) == process.start_ticks


def myself() -> RecordedProcess | None:
    ticks = process_start_ticks(os.getpid())
    return None if ticks is None else RecordedProcess(os.getpid(), ticks)


class ProcessRecord:
    """This run's `instances.json`: `add` a process once started, `remove` it once it exited.
    Thread-safe; each change rewrites the file whole (write, then rename)."""

    def __init__(self, run_folder: Path) -> None:
        self.path = run_folder / RECORD_NAME
        self._owner = myself()
        self._processes: dict[int, RecordedProcess] = {}
        self._lock = threading.Lock()
        self._write()

    def add(self, pid: int) -> None:
        ticks = process_start_ticks(pid)
        if ticks is None:  # gone already (or no /proc): nothing to stop later
            return
        with self._lock:
            self._processes[pid] = RecordedProcess(pid, ticks)
            self._write()

    def remove(self, pid: int) -> None:
        with self._lock:
            if self._processes.pop(pid, None) is not None:
                self._write()

    def _write(self) -> None:
        owner = None if self._owner is None else vars_of(self._owner)
        body = {"owner": owner, "instances": [vars_of(p) for p in self._processes.values()]}
        scratch = self.path.with_suffix(".tmp")
        try:
            scratch.write_text(json.dumps(body))
            os.replace(scratch, self.path)
        except FileNotFoundError:  # the run's folder is gone: it has stopped, nothing to record
            pass


def vars_of(process: RecordedProcess) -> dict[str, int]:
    return {"pid": process.pid, "start_ticks": process.start_ticks}


def _read(run_folder: Path) -> tuple[RecordedProcess | None, list[RecordedProcess]]:
    """The record's owner and instances; nothing for a missing or unreadable record (a run
    killed before it wrote one started no instance)."""
    try:
        body = json.loads((run_folder / RECORD_NAME).read_text())
        owner = None if body["owner"] is None else RecordedProcess(**body["owner"])
        return owner, [RecordedProcess(**entry) for entry in body["instances"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None, []


def owner_replaced(run_folder: Path) -> bool:
    """Whether the run's recorded owner is gone although a process holds its pid now."""
    owner, _ = _read(run_folder)
    return owner is not None and not running(owner)


def stop_orphans(run_folder: Path, wait_s: float = TERM_WAIT_S) -> list[int]:
    """Stop the recorded instance processes of a run whose owner is gone: SIGTERM to each
    one's process group (its session: the server and any engine child), SIGKILL to those still
    running after `wait_s`. Returns the pids that were running."""
    _, recorded = _read(run_folder)
    orphans = [p for p in recorded if running(p)]
    for process in orphans:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while any(running(p) for p in orphans) and time.monotonic() < deadline:
        time.sleep(0.05)
    for process in orphans:
        _signal_group(process, signal.SIGKILL)
    return [p.pid for p in orphans]


def _signal_group(process: RecordedProcess, signum: int) -> None:
    if not running(process):
        return
    try:
        if os.getpgid(process.pid) == process.pid:  # it leads its group, as it was started
            os.killpg(process.pid, signum)
        else:
            os.kill(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
