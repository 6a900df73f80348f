"""What a custody check says: passed (with notes on what it could and could not recompute), or
a refusal of one line naming the file and the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tts_bench.errors import TtsBenchError, printable


class CustodyError(TtsBenchError):
    """An artifact does not follow from what it names: a source missing, a field that the code
    re-derives differently, raw data missing or unreadable. Exit 1, as a check that failed."""

    exit_code = 1

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(printable(f"{path}: {problem}"))


@dataclass(frozen=True, slots=True)
class Checked:
    """An artifact that follows from its sources: its kind, how it was checked, and what was
    taken as recorded (legacy exemptions, inputs nothing re-derives)."""

    path: Path
    kind: str
    how: str
    notes: tuple[str, ...] = field(default=())

    def line(self) -> str:
        notes = "".join(f"; {n}" for n in self.notes)
        return printable(f"ok {self.path}: {self.kind}, {self.how}{notes}")


class Sources(Protocol):
    """The folder an artifact's sources are looked up in, by sha256, and checked in turn."""

    folder: Path

    def find(self, sha256: str) -> Path | None: ...

    def check(self, path: Path) -> Checked: ...


def check_name(path: Path, expected: str) -> None:
    """Every artifact is written under the name its fingerprint and provenance give."""
    if path.name != expected:
        raise CustodyError(
            path,
            f"fingerprint: the file's fingerprint and provenance name it {expected}; an artifact "
            "renamed, or whose fingerprint was edited, is not the one that was measured",
        )
