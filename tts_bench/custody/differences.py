"""The one comparison: a recorded artifact against the one re-derived from its sources.

Both sides are JSON values (`model_dump(mode="json")`); the walk reports the first path where
they differ, in the artifact's own field order: `scaling_target_value`,
`deploy.policies[0].target_value`, `findings[surge_survival].verdict`, `rungs[3].ttfab_p95_ms`.
A list of objects that all carry a `name` is matched by name, so a finding is named, not
numbered. Numbers agree within a tolerance (`Tolerance`): recomputing the same figures from the
same data in another order moves the last bits of a float, not a deployed number. Paths an
`exempt` predicate accepts are not compared (descriptive text, the time an artifact was made).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tts_bench.errors import printable

# (relative, absolute) slack for two numbers at one path.
Tolerance = Callable[[str], tuple[float, float]]
Exempt = Callable[[str], bool]

# Figures recomputed from the same data in another order agree to about 1e-15; rounding to 9
# places (SPEC §6) is far coarser. Anything past this is an edit, not float noise.
FLOAT_TOLERANCE: Final = (1e-9, 1e-9)


def same_tolerance(_path: str) -> tuple[float, float]:
    return FLOAT_TOLERANCE


def nothing_exempt(_path: str) -> bool:
    return False


def exempt_paths(patterns: Iterable[str]) -> Exempt:
    """A predicate accepting any path that fully matches one of the regular expressions."""
    compiled = [re.compile(p) for p in patterns]
    return lambda path: any(c.fullmatch(path) for c in compiled)


@dataclass(frozen=True, slots=True)
class Difference:
    """Where two artifacts first differ, and both values there."""

    path: str
    recorded: Any
    derived: Any

    def describe(self, how: str) -> str:
        """`rungs[3].ttfab_p95_ms is 130.0; recomputed from its raw samples it is 128.4`: one
        printable line, `how` saying where the second value comes from."""
        return printable(
            f"{self.path or '(top level)'} is {show(self.recorded)}; {how} it is "
            f"{show(self.derived)}"
        )


def show(value: Any) -> str:
    """A value as JSON, cut short: enough to see what differs."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def first_difference(
    recorded: Any,
    derived: Any,
    *,
    exempt: Exempt = nothing_exempt,
    tolerance: Tolerance = same_tolerance,
    path: str = "",
) -> Difference | None:
    """The first path (depth first, recorded order) where `recorded` and `derived` differ."""
    if exempt(path):
        return None
    if isinstance(recorded, dict) and isinstance(derived, dict):
        keys = [*recorded, *(k for k in derived if k not in recorded)]
        for key in keys:
            if key not in recorded or key not in derived:
                where = _join(path, key)
                if not exempt(where):
                    return Difference(where, recorded.get(key), derived.get(key))
                continue
            found = first_difference(
                recorded[key], derived[key], exempt=exempt, tolerance=tolerance,
                path=_join(path, key),
            )  # fmt: skip
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(derived, list):
        return _list_difference(recorded, derived, exempt, tolerance, path)
    if _same(recorded, derived, tolerance(path)):
        return None
    return Difference(path, recorded, derived)


def _list_difference(
    recorded: Sequence[Any], derived: Sequence[Any], exempt: Exempt, tolerance: Tolerance, path: str
) -> Difference | None:
    named = _names(recorded), _names(derived)
    if named[0] is not None and named[1] is not None:
        if named[0] != named[1]:
            return Difference(f"{path}[*].name", named[0], named[1])
        labels: Sequence[str] = named[0]
    else:
        if len(recorded) != len(derived):
            return Difference(f"{path} (length)", len(recorded), len(derived))
        labels = [str(i) for i in range(len(recorded))]
    for label, a, b in zip(labels, recorded, derived, strict=True):
        found = first_difference(a, b, exempt=exempt, tolerance=tolerance, path=f"{path}[{label}]")
        if found is not None:
            return found
    return None


def _names(items: Sequence[Any]) -> list[str] | None:
    """The items' names when every item is an object with a unique string `name`."""
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    names = [i["name"] for i in items]
    return names if len(set(names)) == len(names) else None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


def _same(a: Any, b: Any, slack: tuple[float, float]) -> bool:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if numbers:
        return math.isclose(a, b, rel_tol=slack[0], abs_tol=slack[1])
    return type(a) is type(b) and a == b
