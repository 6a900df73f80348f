"""A ttotal artifact recomputed from its recorded events with the stage builder that made it.

Every stage (name, seconds, counted, note) comes again from the timestamps (`TtotalEvents`,
`measure.ttotal.stages`), the measured total from the counted stages, the planned total from the
lag bound the artifact records (an input, as are the recovery rule and the fingerprint, checked
by the file's name). The ladder the recovery was judged against must be in the same folder. A
reference T_total is accepted only as a pinned file; a measured or emulated one without its
events is refused.
"""

from __future__ import annotations

from pathlib import Path

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Fingerprint, ttotal_filename
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.custody.differences import first_difference
from tts_bench.custody.outcome import Checked, CustodyError, Sources, check_name
from tts_bench.custody.references import check_reference
from tts_bench.measure.ttotal.probe import TtotalError
from tts_bench.measure.ttotal.stages import measured_total_s, stages_from_events


def check_ttotal(path: Path, ttotal: TtotalArtifact, sha256: str, sources: Sources) -> Checked:
    if ttotal.provenance.kind == "reference":
        return check_reference(path, ttotal, sha256)
    if ttotal.provenance.kind == "simulated" or ttotal.fingerprint is None:
        raise CustodyError(
            path,
            f"provenance.kind is {ttotal.provenance.kind}"
            + ("" if ttotal.fingerprint else " and fingerprint is null")
            + ": only a measured or emulated T_total with its events can be checked",
        )
    check_name(
        path, ttotal_filename(ttotal.fingerprint, ttotal.trigger.value, ttotal.provenance.kind)
    )
    if ttotal.events is None:
        raise CustodyError(
            path,
            "events: not recorded (measured before they were kept): a T_total is checked "
            "against the timestamps its stages came from; measure it again",
        )
    try:
        stages = stages_from_events(ttotal.events)
    except TtotalError as exc:
        raise CustodyError(path, f"events: {exc}") from None
    total = measured_total_s(stages)
    expected = ttotal.model_dump(mode="json")
    expected.update(
        stages=[s.model_dump(mode="json") for s in stages],
        measured_total_s=total,
        planned_total_s=total + ttotal.policy_lag_bound_s,
    )
    found = first_difference(ttotal.model_dump(mode="json"), expected)
    if found is not None:
        raise CustodyError(path, found.describe("recomputed from its events"))
    judged_by = _judged_by(path, ttotal, sources)
    how = f"{len(stages)} stages and the total recomputed from {len(ttotal.events.points)} events"
    return Checked(path, f"ttotal {ttotal.provenance.kind}", how + judged_by)


def _judged_by(path: Path, ttotal: TtotalArtifact, sources: Sources) -> str:
    if ttotal.qmax_sha256 is None:
        return ""
    ladder = sources.find(ttotal.qmax_sha256)
    if ladder is None:
        raise CustodyError(
            path,
            f"qmax_sha256: the ladder its recovery was judged against (sha256 "
            f"{ttotal.qmax_sha256[:12]}…) is not in {sources.folder}; a later run replaced it, "
            "so measure T_total again against the ladder there",
        )
    # A T_total carries the fingerprint of the ladder it was measured against.
    judged = load_artifact(ladder, QmaxArtifact)
    if judged.fingerprint != ttotal.fingerprint:
        found = first_difference(
            _dump(ttotal.fingerprint), _dump(judged.fingerprint), path="fingerprint"
        )
        raise CustodyError(path, found.describe(f"in {ladder.name}") if found else "")
    return f", judged against {ladder.name}"


def _dump(fingerprint: Fingerprint | None) -> object:
    return None if fingerprint is None else fingerprint.model_dump(mode="json")
