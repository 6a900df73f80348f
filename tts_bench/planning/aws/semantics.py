"""What AWS leaves open about scaling a SageMaker variant, as named readings (variant sets).

`aws_scaling` states every rule AWS documents. A few things that decide which scaling rule wins
are documented nowhere, or only loosely; each is a field here, and a variant set fixes every one
of them. Two sets are named, and any other is a JSON file with the same fields:

- `documented`: each open point at the reading judged most likely (docs/aws-semantics.md argues
  each choice);
- `pessimistic`: each open point at the reading worst for a reactive policy's promise (sheds):
  slow detection, late publication, a fast scale-in, a long Updating after a scale-in.

`simulate`, `rehearse` and `local-cloud` take `--aws-semantics NAME|FILE`; every simulation and
rehearsal artifact records the set it ran under (`AwsSemantics.record`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Final

from tts_bench.errors import TtsBenchError

# Documented by AWS, so the same in every set: an alarm with an Auto Scaling action "continues to
# invoke the action once per minute that the alarm remains in the new state" [CW-actions].
ACTION_REPEAT_S: Final = 60


class SemanticsError(TtsBenchError):
    """A variant set that is not a known name nor a valid file."""


@dataclass(frozen=True)
class AwsSemantics:
    """One reading of every open point (module docstring); the fields are the open points."""

    name: str
    # Target tracking on the high-resolution concurrency metric: the period of AlarmHigh's
    # 3 datapoints. SageMaker says such a policy scales out "much more quickly" [SM-policy];
    # Application Auto Scaling says it evaluates predefined metrics at one minute [AAS-tt].
    high_resolution_tracking_period_s: int
    # AlarmLow: how many consecutive one-minute datapoints below 90 % of the target.
    tracking_low_datapoints: int
    # How long after a standard (one-minute) period closes its datapoint reaches an alarm.
    standard_publication_delay_s: int
    # Whether UpdateEndpointWeightsAndCapacities is refused while the endpoint is Updating
    # (reported as `ValidationException: Cannot update in-progress endpoint`).
    refuse_while_updating: bool
    # How long an endpoint stays Updating after a scale-in (a scale-out's Updating lasts until
    # its instances serve). The simulator's figure; the local cloud has its own drain.
    scale_in_updating_s: float
    action_repeat_s: int = ACTION_REPEAT_S

    def record(self) -> dict[str, object]:
        """What an artifact records of the set: its fields and a short hash of them."""
        return {**asdict(self), "sha256": self.digest}

    @property
    def digest(self) -> str:
        return semantics_digest(asdict(self))


DOCUMENTED: Final = AwsSemantics(
    name="documented",
    high_resolution_tracking_period_s=10,
    tracking_low_datapoints=15,
    standard_publication_delay_s=60,
    refuse_while_updating=True,
    scale_in_updating_s=60.0,
)
PESSIMISTIC: Final = AwsSemantics(
    name="pessimistic",
    high_resolution_tracking_period_s=60,
    tracking_low_datapoints=3,
    standard_publication_delay_s=120,
    refuse_while_updating=True,
    scale_in_updating_s=300.0,
)
NAMED: Final = {s.name: s for s in (DOCUMENTED, PESSIMISTIC)}

_BOUNDS: Final = {
    "high_resolution_tracking_period_s": (10, 60),
    "tracking_low_datapoints": (1, 100),
    "standard_publication_delay_s": (0, 600),
    "scale_in_updating_s": (0, 3600),
    "action_repeat_s": (10, 600),
}


def semantics_digest(fields: dict[str, object]) -> str:
    """16 hex of the sha256 over a set's fields as sorted JSON (floats as floats)."""
    body = json.dumps(
        {k: float(v) if k == "scale_in_updating_s" else v for k, v in fields.items()},
        sort_keys=True,
    ).encode()
    return hashlib.sha256(body).hexdigest()[:16]


def semantics_from_json(text: str, source: str) -> AwsSemantics:
    """A variant set from a JSON object with every field; a bad one is one clear line."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SemanticsError(f"{source}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(raw, dict):
        raise SemanticsError(f"{source}: a variant set is a JSON object of its fields")
    known = {f.name: f for f in fields(AwsSemantics)}
    unknown = sorted(set(raw) - set(known))
    missing = sorted(n for n, f in known.items() if n not in raw and n != "action_repeat_s")
    if unknown or missing:
        raise SemanticsError(
            f"{source}: "
            + "; ".join(
                ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])
                + ([f"missing field(s) {', '.join(missing)}"] if missing else [])
            )
            + f" (fields: {', '.join(known)})"
        )
    values: dict[str, object] = {}
    for name, value in raw.items():
        values[name] = _checked(source, name, value)
    return AwsSemantics(**values)  # type: ignore[arg-type]


def _checked(source: str, name: str, value: object) -> object:
    if name == "name":
        if not isinstance(value, str) or not value.strip():
            raise SemanticsError(f"{source}: name must be a non-empty string")
        return value
    if name == "refuse_while_updating":
        if not isinstance(value, bool):
            raise SemanticsError(f"{source}: refuse_while_updating must be true or false")
        return value
    low, high = _BOUNDS[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise SemanticsError(f"{source}: {name} must be a number from {low} to {high}")
    if name == "high_resolution_tracking_period_s" and value not in (10, 60):
        raise SemanticsError(f"{source}: {name} must be 10 or 60 (the metric's periods)")
    if name == "scale_in_updating_s":
        return float(value)
    if float(value) != int(value):
        raise SemanticsError(f"{source}: {name} must be a whole number")
    return int(value)


def semantics_named(name: str) -> AwsSemantics:
    if name not in NAMED:
        raise SemanticsError(f"unknown AWS semantics {name!r}: use {', '.join(NAMED)} or a file")
    return NAMED[name]
