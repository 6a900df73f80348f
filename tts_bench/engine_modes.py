"""The engine's modes as the fingerprint reports them (`ENGINE_MODE`), shared by engine and plan.

`concurrent` lets requests share the model; with the torch backend and `ENGINE_MAX_BATCH` > 1
their segments share forward passes, so a request's service time grows with the load and the
plan takes its first-chunk alarm from the trigger rung, not from c=1. `serial` (the published
design) serves one request at a time.
"""

from __future__ import annotations

from collections.abc import Mapping

MODE_ENV = "ENGINE_MODE"
MAX_BATCH_ENV = "ENGINE_MAX_BATCH"
BATCHING_ENGINE_MODE = "concurrent"
SERIAL_ENGINE_MODE = "serial"
ENGINE_MODES = (BATCHING_ENGINE_MODE, SERIAL_ENGINE_MODE)


def engine_batches(performance_env: Mapping[str, str]) -> bool:
    """True when the measured engine put several requests' segments in one forward pass."""
    if performance_env.get(MODE_ENV) != BATCHING_ENGINE_MODE:
        return False
    try:
        return int(performance_env.get(MAX_BATCH_ENV, "1")) > 1
    except ValueError:
        return False
