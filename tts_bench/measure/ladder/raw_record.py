"""What a qmax artifact was computed from besides its samples: `qmax-….json.raw.json.gz`.

The samples file (`samples`) holds one record per request. A rung's figures also read each
load-generating process's CPU readings (is the client the bottleneck?) and, on an endpoint,
CloudWatch's datapoints (each rung's ratio to the client's in-flight). Both are kept here, as
read, so `tts-bench verify` recomputes every figure with the code that made it, beside the
fingerprint the target reported (an edit of the artifact's alone shows).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Final

from pydantic import Field, ValidationError

from tts_bench.artifacts.cloudwatch import CloudWatchStat
from tts_bench.artifacts.files import parse_artifact_json, write_atomically
from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.errors import ArtifactError
from tts_bench.measure.ladder.statistics import CpuReading
from tts_bench.strict import StrictModel

RAW_SUFFIX: Final = ".raw.json.gz"


class QmaxRaw(StrictModel):
    """The fingerprint the target reported when the ladder began, CPU readings `(worker, unix
    seconds, cumulative CPU seconds)` and, per CloudWatch statistic key (`Maximum/10s`), the
    datapoints read: `(period start, value)`."""

    fingerprint: Fingerprint
    cpu: list[tuple[str, float, float]] = Field(default_factory=list)
    cloudwatch: dict[str, list[tuple[float, float]]] = Field(default_factory=dict)

    @classmethod
    def of(cls, fingerprint: Fingerprint, cpu: list[CpuReading]) -> QmaxRaw:
        return cls(fingerprint=fingerprint, cpu=[(r.worker, r.ts, r.cpu_s) for r in cpu])

    def cpu_readings(self) -> list[CpuReading]:
        return [CpuReading(worker, ts, cpu_s) for worker, ts, cpu_s in self.cpu]

    def with_reads(self, stat: CloudWatchStat, points: list[tuple[float, float]]) -> QmaxRaw:
        return self.model_copy(update={"cloudwatch": {**self.cloudwatch, stat.key: points}})


def raw_path(artifact_path: str | os.PathLike[str]) -> Path:
    """`qmax-….json` → `qmax-….json.raw.json.gz` (not `*.json`: it is no artifact of its own)."""
    path = Path(artifact_path)
    return path.with_name(path.name + RAW_SUFFIX)


def write_raw(path: str | os.PathLike[str], raw: QmaxRaw) -> Path:
    # mtime=0 keeps the file byte-identical for identical readings.
    data = gzip.compress((raw.model_dump_json() + "\n").encode("utf-8"), mtime=0)
    return write_atomically(Path(path), data)


def read_raw(path: str | os.PathLike[str]) -> QmaxRaw:
    path = Path(path)
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read: {exc}") from None
    try:
        return QmaxRaw.model_validate(parse_artifact_json(text, path))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ArtifactError(f"{path}: {loc}: {first['msg']}") from None
