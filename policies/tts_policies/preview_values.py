"""Reading resource properties at preview, where some are not known yet.

pulumi-policy raises `UnknownValueError` when a validator touches an unknown value and turns it
into an advisory note, which would let a mandatory rule pass unseen. These helpers turn it into
`UnknownAtPreview`, which each rule reports as a violation naming the property instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import proxy
from pulumi_policy.proxy import UnknownValueError

MISSING: Any = object()
# The sentinels the engine sends for values it cannot know before the deployment runs.
_SENTINELS = frozenset(
    getattr(proxy, name)
    for name in dir(proxy)
    if name.startswith("UNKNOWN_") and name.endswith("_VALUE")
)


def _is_unknown(value: Any) -> bool:
    return isinstance(value, str) and value in _SENTINELS


class UnknownAtPreview(Exception):
    """A property the rule must read is unknown until the deployment runs."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


def read(props: Any, *path: str | int, default: Any = MISSING, deep: bool = True) -> Any:
    """`props[path[0]][path[1]]…`, or `default` when a step is absent; unknowns raise.

    With `deep` (the default) an unknown anywhere inside the value raises too; without it only
    the value itself is checked, for a caller that reads inside it field by field."""
    value = props
    for depth, key in enumerate(path):
        where = "." + ".".join(str(p) for p in path[: depth + 1])
        try:
            if isinstance(key, int):
                if not isinstance(value, Sequence) or isinstance(value, str) or key >= len(value):
                    return default
            elif not isinstance(value, Mapping) or key not in value:
                return default
            value = value[key]
        except UnknownValueError:
            raise UnknownAtPreview(where) from None
        if _is_unknown(value):
            raise UnknownAtPreview(where)
    return _check_known(value, "." + ".".join(str(p) for p in path)) if deep else value


def _check_known(value: Any, where: str) -> Any:
    """Refuse a container holding an unknown anywhere inside (a rule may iterate over it)."""
    if _is_unknown(value):
        raise UnknownAtPreview(where)
    if isinstance(value, Mapping):
        for key in value:
            try:
                _check_known(value[key], f"{where}.{key}")
            except UnknownValueError:
                raise UnknownAtPreview(f"{where}.{key}") from None
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for index in range(len(value)):
            try:
                _check_known(value[index], f"{where}.{index}")
            except UnknownValueError:
                raise UnknownAtPreview(f"{where}.{index}") from None
    return value


@contextlib.contextmanager
def unknowns_reported(
    report: Callable[..., None], what: str, urn: str | None = None
) -> Iterator[None]:
    """Report an unknown read inside the block as a violation about `what`, never a pass."""
    try:
        yield
    except UnknownAtPreview as exc:
        message = (
            f"{what}: {exc.path} is unknown at preview, so this rule cannot check it; "
            "make it a literal (stack config or a tag the program sets)"
        )
        if urn:
            report(message, urn)
        else:
            report(message)
