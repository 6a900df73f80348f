"""The ladder's samples while it runs: each load-generating process records, the master merges.

`Recorder` is one process's: the rung it was told, the samples of its requests not yet sent on,
its CPU readings, and the start of each request still open. `drain` hands all that on in plain
types (a worker's report travels to the master as msgpack). `Store` is the master's (or the one
local process's): every process's samples merged, and enough of each process's open requests
to know when a window's samples are all in.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ladder.statistics import CpuReading
from tts_bench.measure.playback import PlaybackTracker
from tts_bench.measure.samples import Outcome, Sample
from tts_bench.measure.transport.contract import KOKORO, EndpointContract
from tts_bench.measure.transport.stream_events import StreamReading


@dataclass
class Recorder:
    """One load-generating process: what it speaks, over what and under which contract, the
    rung it is told, its unsent samples and CPU readings."""

    worker: str
    corpus: tuple[Utterance, ...] = ()
    transport: Transport = Transport.LOCAL_HTTP
    contract: EndpointContract = KOKORO
    rung: int | None = None
    pending: list[Sample] = field(default_factory=list)
    cpu: list[CpuReading] = field(default_factory=list)
    open_starts: dict[int, float] = field(default_factory=dict)
    cpu_sampler: object | None = None  # the loop that calls `read_cpu`, once started
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def told(self, rung: int | None) -> None:
        """The master announced the rung now held (None: between rungs)."""
        self.rung = rung

    def opened(self, start: float) -> int:
        """A request started at `start` (epoch); the token closes it."""
        token = next(self._ids)
        self.open_starts[token] = start
        return token

    def closed(self, token: int, sample: Sample) -> None:
        self.open_starts.pop(token, None)
        self.pending.append(sample)

    def finished(
        self, token: int, reading: StreamReading, heard: PlaybackTracker, rung: int | None
    ) -> Sample:
        """The request opened as `token` ended now: its sample, kept for the next drain."""
        latency_ms = (reading.clock() - reading.started) * 1000
        played = heard.result()
        sample = Sample(
            rung, self.worker, self.open_starts[token], time.time(), reading.ttfab_ms, latency_ms,
            reading.outcome or Outcome.ERROR, reading.detail, reading.server_first_chunk_ms,
            audio_ms=played.audio_s * 1000 if played.audio_s else None,
            stall_ms=played.stall_s * 1000 if played.audio_s else None,
        )  # fmt: skip
        self.closed(token, sample)
        return sample

    def read_cpu(self) -> None:
        """This process's cumulative CPU seconds now (the load generator's own timing)."""
        times = psutil.Process().cpu_times()
        self.cpu.append(CpuReading(self.worker, time.time(), times.user + times.system))

    def drain(self) -> dict[str, Any]:
        """Everything new since the last drain, in plain types (it travels as msgpack)."""
        samples, self.pending = self.pending, []
        cpu, self.cpu = self.cpu, []
        return {
            "worker": self.worker,
            "samples": [s.to_wire() for s in samples],
            "cpu": [[r.ts, r.cpu_s] for r in cpu],
            "at": time.time(),
            "open": sorted(self.open_starts.values()),
        }


@dataclass
class Store:
    """On the master (or the one local process): every process's samples, merged."""

    samples: list[Sample] = field(default_factory=list)
    cpu: list[CpuReading] = field(default_factory=list)
    # worker -> (time of its last report, starts of the requests it had open then)
    open_state: dict[str, tuple[float, list[float]]] = field(default_factory=dict)

    def merge(self, report: dict[str, Any]) -> None:
        worker = report["worker"]
        self.samples.extend(Sample.from_wire(row) for row in report["samples"])
        self.cpu.extend(CpuReading(worker, ts, cpu_s) for ts, cpu_s in report["cpu"])
        self.open_state[worker] = (report["at"], list(report["open"]))

    def settled(self, at: float) -> bool:
        """Every process reported after `at`, and nothing open then had started before `at`."""
        return bool(self.open_state) and all(
            seen >= at and min(starts, default=at) >= at
            for seen, starts in self.open_state.values()
        )

    def reported_since(self, at: float) -> bool:
        """Every process reported after `at`: every request that ended before `at` is in."""
        return bool(self.open_state) and all(seen >= at for seen, _ in self.open_state.values())

    def open_starts(self) -> list[float]:
        return [start for _, starts in self.open_state.values() for start in starts]
