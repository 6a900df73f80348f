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
from dataclasses import astuple, dataclass, fields
from enum import StrEnum
from pathlib import Path

from tts_bench.artifacts.atomic_file import write_atomically
from tts_bench.errors import ArtifactError

SAMPLES_SUFFIX = ".samples.csv.gz"


class Outcome(StrEnum):
    OK = "ok"  # the stream ended with a `done` event
    REJECTED = "rejected"  # 503 queue_saturated: the admission gate refused it
    ERROR = "error"  # any other failure (HTTP error, error event, broken stream)
    CANCELLED = "cancelled"  # the load generator stopped it (end of a rung); load, not a result


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
            server_first_chunk_ms=(
                float(row["server_first_chunk_ms"]) if row.get("server_first_chunk_ms") else None
            ),
        )

    def to_wire(self) -> list[object]:
        """A plain list for Locust's worker → master messages (msgpack)."""
        return [*astuple(self)[:6], self.outcome.value, self.detail, self.server_first_chunk_ms]

    @classmethod
    def from_wire(cls, data: list[object]) -> Sample:
        rung, worker, start, end, ttfab, latency, outcome, detail, *rest = data
        server_first = rest[0] if rest else None
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
        )


COLUMNS = tuple(f.name for f in fields(Sample))
# Sample files written before the server reported its own first-chunk latency.
_COLUMNS_BEFORE_SERVER_FIRST_CHUNK = COLUMNS[:-1]


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
            if tuple(reader.fieldnames or ()) not in (COLUMNS, _COLUMNS_BEFORE_SERVER_FIRST_CHUNK):
                raise ArtifactError(f"{path}: columns {reader.fieldnames} are not {list(COLUMNS)}")
            return [Sample.from_row(row) for row in reader]
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except (OSError, ValueError, KeyError) as exc:
        raise ArtifactError(f"{path}: cannot read samples: {exc}") from None
