"""Integer steps over derived figures, immune to floating-point noise (SPEC §6)."""

from __future__ import annotations

import math


def round9(x: float) -> float:
    """Round away float noise before any ceil/floor (1.2 − 1 = 0.19999999999999996)."""
    return round(x, 9)


def ceil9(x: float) -> int:
    return math.ceil(round9(x))


def floor9(x: float) -> int:
    return math.floor(round9(x))
