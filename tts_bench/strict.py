"""One strict model base and one strict JSON parser, for the artifacts and the wire protocol.

A leaf (it imports only pydantic and the standard library), so the serving container imports it
as the artifacts do: both read JSON that a person or another program wrote, and both refuse
the same things in it.

- `StrictModel`: unknown fields are errors (a misspelt key is never silently dropped), and
  NaN and infinities are refused: an infinite SLO or rate is never a measurement, and JSON
  has no way to write one back (pydantic would write null, which the schema then refuses).
- `strict_loads`: `json.loads` that refuses NaN, Infinity, numbers beyond the float range and
  integers of more than `MAX_INTEGER_DIGITS` digits, each with `UnrepresentableNumber`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict

# No field of an artifact or a request takes a longer integer, and every shorter one converts
# to a finite float (10**300 < 1.8e308), so no check downstream overflows.
MAX_INTEGER_DIGITS = 300


class StrictModel(BaseModel):
    """The base of every artifact and request model: extra fields and non-finite floats refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class UnrepresentableNumber(ValueError):
    """A JSON number refused while parsing: non-finite, or an integer of too many digits."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UnrepresentableNumber(f"the number {text[:40]} is beyond the float range")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise UnrepresentableNumber(
            f"an integer has {digits} digits; at most {MAX_INTEGER_DIGITS} are accepted"
        )
    return int(text)


def _no_constant(name: str) -> float:
    raise UnrepresentableNumber(f"{name} is not a JSON number; write a finite number")


def strict_loads(text: str) -> Any:
    """`text` as JSON values, refusing what `UnrepresentableNumber` names.

    Everything else `json.loads` raises is raised as it is (`json.JSONDecodeError`, a
    `RecursionError` for deep nesting, a `ValueError` for the interpreter's own limits).
    """
    return json.loads(
        text, parse_float=_finite_float, parse_int=_bounded_int, parse_constant=_no_constant
    )
