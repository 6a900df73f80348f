"""Raw ladder samples: one record per request, and the `.samples.csv.gz` beside a qmax artifact.

Every statistic of a rung is recomputed from these records, never from Locust's rounded
buckets, so the file is what a reader needs to check an artifact. Times are Unix epoch
seconds taken on the load-generating process (`worker`: host and process id).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np

from tts_bench.artifacts.files import write_atomically
from tts_bench.errors import ArtifactError
from tts_bench.measure.transport.stream_events import Outcome

SAMPLES_SUFFIX = ".samples.csv.gz"


@dataclass(frozen=True, slots=True)
class Sample:
    """One request as the client saw it."""

    rung: int | None  # the rung the request was started in (None: between rungs)
    worker: str  # load-generating process, `<host>:<pid>`
    start: float  # epoch seconds, just before the request was sent
    end: float  # epoch seconds, when its stream ended (or failed, or was cancelled)
    ttfab_ms: float | None  # to the first audio chunk; None when no chunk arrived
    latency_ms: float  # to the end of the stream
    outcome: Outcome
    detail: str = ""  # status code or error text for failures
    # The server's own FirstChunkLatency (its `done` event), ms; None when it sent none.
    server_first_chunk_ms: float | None = None
    # Playback (measure.playback): audio received and the listener's total stall, ms.
    audio_ms: float | None = None
    stall_ms: float | None = None
    # Open loop (surge): when the request was meant to be sent; `start` is when it was sent.
    intended_start: float | None = None

    @property
    def intended_ttfab_ms(self) -> float | None:
        """TTFAB from the intended send time (no coordinated omission); send-time TTFAB otherwise."""
        if self.ttfab_ms is None or self.intended_start is None:
            return self.ttfab_ms
        return self.ttfab_ms + (self.start - self.intended_start) * 1000

    def to_row(self) -> list[str]:
        return [
            "" if v is None else (repr(v) if isinstance(v, float) else str(v))
            for v in astuple(self)
        ]

    @classmethod
    def from_row(cls, row: dict[str, str]) -> Sample:
        return cls(
            rung=int(row["rung"]) if row["rung"] else None,
            worker=row["worker"],
            start=float(row["start"]),
            end=float(row["end"]),
            ttfab_ms=float(row["ttfab_ms"]) if row["ttfab_ms"] else None,
            latency_ms=float(row["latency_ms"]),
            outcome=Outcome(row["outcome"]),
            detail=row["detail"],
            server_first_chunk_ms=_optional_float(row, "server_first_chunk_ms"),
            audio_ms=_optional_float(row, "audio_ms"),
            stall_ms=_optional_float(row, "stall_ms"),
            intended_start=_optional_float(row, "intended_start"),
        )

    def to_wire(self) -> list[object]:
        """A plain list for Locust's worker → master messages (msgpack)."""
        values = astuple(self)
        return [*values[:6], self.outcome.value, *values[7:]]

    @classmethod
    def from_wire(cls, data: list[object]) -> Sample:
        rung, worker, start, end, ttfab, latency, outcome, detail, *rest = data
        server_first, audio, stall, intended = [*rest, None, None, None, None][:4]
        return cls(
            rung=None if rung is None else int(rung),  # type: ignore[call-overload]
            worker=str(worker),
            start=float(start),  # type: ignore[arg-type]
            end=float(end),  # type: ignore[arg-type]
            ttfab_ms=None if ttfab is None else float(ttfab),  # type: ignore[arg-type]
            latency_ms=float(latency),  # type: ignore[arg-type]
            outcome=Outcome(str(outcome)),
            detail=str(detail),
            server_first_chunk_ms=None if server_first is None else float(server_first),  # type: ignore[arg-type]
            audio_ms=None if audio is None else float(audio),  # type: ignore[arg-type]
            stall_ms=None if stall is None else float(stall),  # type: ignore[arg-type]
            intended_start=None if intended is None else float(intended),  # type: ignore[arg-type]
        )


def _optional_float(row: dict[str, str], key: str) -> float | None:
    value = row.get(key)
    return float(value) if value else None


COLUMNS = tuple(f.name for f in fields(Sample))
# Older sample files end earlier: before playback figures (3 fewer), before the server's own
# first-chunk latency (4 fewer).
_ACCEPTED_COLUMNS = (COLUMNS, COLUMNS[:-3], COLUMNS[:-4])


def samples_path(artifact_path: str | os.PathLike[str]) -> Path:
    """`qmax-….json` → `qmax-….json.samples.csv.gz`."""
    path = Path(artifact_path)
    return path.with_name(path.name + SAMPLES_SUFFIX)


def write_samples(path: str | os.PathLike[str], samples: list[Sample]) -> Path:
    """Write the samples, ordered by start time, atomically (temp file, then rename)."""
    path = Path(path)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    for sample in sorted(samples, key=lambda s: (s.start, s.worker)):
        writer.writerow(sample.to_row())
    # mtime=0 keeps the file byte-identical for identical samples.
    return write_atomically(path, gzip.compress(text.getvalue().encode("utf-8"), mtime=0))


def read_samples(path: str | os.PathLike[str]) -> list[Sample]:
    path = Path(path)
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            if tuple(reader.fieldnames or ()) not in _ACCEPTED_COLUMNS:
                raise ArtifactError(f"{path}: columns {reader.fieldnames} are not {list(COLUMNS)}")
            return [Sample.from_row(row) for row in reader]
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except (OSError, ValueError, KeyError) as exc:
        raise ArtifactError(f"{path}: cannot read samples: {exc}") from None


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def mean_in_flight(samples: Iterable[Sample], w0: float, w1: float) -> float:
    """Time-averaged outstanding requests over [w0, w1)."""
    busy = sum(max(0.0, min(s.end, w1) - max(s.start, w0)) for s in samples)
    return busy / (w1 - w0)
