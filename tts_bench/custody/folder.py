"""One measurements folder: its artifacts found by sha256, each checked at most once.

`check(path)` reads a file, tells its kind from its `artifact` key (or a GPU summary's
`summary` key) and checks it against what it was made from, in turn checking what it names
(a plan its qmax and ttotal, a ttotal its ladder, ...). Anything else is refused in one line as
not an artifact. A file's check is kept by its sha256, so a ladder two plans name is read once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from tts_bench.artifacts.companions import json_digests
from tts_bench.artifacts.files import load_artifact, parse_artifact_json, sha256_file
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rehearsal import RehearsalArtifact
from tts_bench.artifacts.simulation import SimulationArtifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.custody.ladders import check_qmax
from tts_bench.custody.others import (
    check_rehearsal,
    check_simulation,
    check_summary,
    check_surge,
)
from tts_bench.custody.outcome import Checked, CustodyError
from tts_bench.custody.plans import PLAN_EXEMPT, check_plan
from tts_bench.custody.scale_outs import check_ttotal
from tts_bench.errors import ArtifactError
from tts_bench.measure.gpu_summary import SUMMARY_KIND

ARTIFACT_KINDS: Final = ("qmax", "ttotal", "plan", "surge", "simulation", "rehearsal")
NOT_AN_ARTIFACT: Final = (
    "not an artifact (no `artifact` key of " + ", ".join(ARTIFACT_KINDS) + f", no {SUMMARY_KIND}"
    "): verify does not check a benchmark's own record, which its command reproduces"
)


_DESCRIPTIVE: Final = r"provenance\.(created_at|source|tool|command|notes)"
# Per kind, the fields no check re-derives: descriptive text, and inputs the recomputation
# uses as recorded (an edit of one shows in the figures it gives, or changes nothing).
TAKEN_AS_RECORDED: Final[dict[str, tuple[str, ...]]] = {
    "plan": PLAN_EXEMPT,
    "qmax": (
        _DESCRIPTIVE,
        r"slo_ms",  # the rungs' verdicts are judged against it again
        r"ladder\..*",  # the schedule: every window is recomputed from it
        r"refinement\.(ended_by|resolution_pct)",
        r"verification_ladder\..*",
        r"rungs\[\d+\]\.client_cpu_percent",  # a legacy ladder's, which kept no readings
        # qmax --no-fleet-level: no figure follows from it (the loader refuses it beside a fleet
        # verification rung); only the plan's warning says why the ratio is unmeasured.
        r"fleet_level_skipped",
    ),
    # Whether curve instances served it says what was measured; no plan reads it.
    "ttotal": (
        _DESCRIPTIVE,
        r"provenance\.curve_modelled",
        r"recovery_rule",
        # The probe's requests before the scale-out are not kept; the model checks its arithmetic.
        r"recovery_baseline\..*",
        r"events\.skew_tolerance_s",
    ),
    "surge": (_DESCRIPTIVE, r"provenance\.curve_modelled", r"qmax_path"),
    "simulation": (
        r"provenance\..*",
        r"fingerprint.*",
        r"policies\[\d+\]\..*",  # simulated figures: re-run the recorded command
        r"inputs\.(traffic|duration_s|seed|price_per_hour_usd|model|over_slo_rule)",
        r"inputs\.files\.[a-z]+\.path",
    ),
    "rehearsal": (
        r"provenance\..*",
        r"fingerprint.*",
        r"(rehearsed|simulated|replays|unscaled|agreement).*",  # live traffic is not repeated
        r"inputs\.(?!files\.[a-z]+\.sha256$|plan_id$).*",
    ),
}


class ArtifactFolder:
    """The artifacts of `folder`, by sha256; `check` verifies one (and what it names)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._digests: dict[Path, str] | None = None
        self._checked: dict[str, Checked] = {}
        self._checking: set[str] = set()

    def digests(self) -> dict[Path, str]:
        """sha256 of every `*.json` directly in the folder (read once)."""
        if self._digests is None:
            self._digests = json_digests(self.folder)
        return self._digests

    def find(self, sha256: str) -> Path | None:
        return next((p for p, d in self.digests().items() if d == sha256), None)

    def check(self, path: Path) -> Checked:
        """`path` against what it was made from; a `CustodyError` (or `ArtifactError`) of one
        line naming the file and the field otherwise."""
        try:
            sha256 = sha256_file(path)
        except FileNotFoundError:
            raise ArtifactError(f"{path}: no such file") from None
        except OSError as exc:
            raise ArtifactError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if sha256 in self._checked:
            return self._checked[sha256]
        if sha256 in self._checking:
            raise CustodyError(path, "names itself among its own sources")
        self._checking.add(sha256)
        try:
            checked = self._check(path, sha256)
        finally:
            self._checking.discard(sha256)
        self._checked[sha256] = checked
        return checked

    def _check(self, path: Path, sha256: str) -> Checked:
        data = _json_of(path)
        kind = data.get("artifact") if isinstance(data, dict) else None
        if kind == "qmax":
            return check_qmax(path, load_artifact(path, QmaxArtifact), sha256)
        if kind == "ttotal":
            return check_ttotal(path, load_artifact(path, TtotalArtifact), sha256, self)
        if kind == "plan":
            return check_plan(path, load_artifact(path, PlanArtifact), self)
        if kind == "surge":
            return check_surge(path, load_artifact(path, SurgeArtifact), self)  # type: ignore[type-var]
        if kind == "simulation":
            return check_simulation(path, load_artifact(path, SimulationArtifact), self)
        if kind == "rehearsal":
            return check_rehearsal(path, load_artifact(path, RehearsalArtifact), self)
        if isinstance(data, dict) and data.get("summary") == SUMMARY_KIND:
            return check_summary(path, data, self)
        raise CustodyError(path, NOT_AN_ARTIFACT)


def _json_of(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read: {exc}") from None
    try:
        return parse_artifact_json(text, path)
    except ArtifactError:
        raise CustodyError(path, NOT_AN_ARTIFACT + " (it is not even JSON)") from None


def verify_file(path: str | os.PathLike[str]) -> Checked:
    """One file checked against its own folder (where its sources must lie)."""
    path = Path(path)
    return ArtifactFolder(path.parent).check(path)
