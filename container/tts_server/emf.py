"""CloudWatch Embedded Metric Format records: metrics as log lines, no API calls from the container.

Names, units, namespace and dimensions come from `tts_bench.telemetry`, the one list the
observability component builds its dashboard and alarms on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tts_bench.telemetry import DIMENSIONS, METRIC_UNITS, NAMESPACE


def emf_record(
    metrics: Mapping[str, float],
    *,
    dimensions: Mapping[str, str],
    timestamp_ms: int,
    properties: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One EMF object: the `_aws` directive, the dimension values, the metric values, properties.

    Raises ValueError for a metric name or a dimension set the shared telemetry module lacks.
    """
    unknown = sorted(set(metrics) - set(METRIC_UNITS))
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; add them to tts_bench.telemetry first")
    if set(dimensions) != set(DIMENSIONS):
        raise ValueError(f"dimensions must be exactly {list(DIMENSIONS)}, got {sorted(dimensions)}")
    return {
        **(properties or {}),
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": NAMESPACE,
                    "Dimensions": [list(DIMENSIONS)],
                    "Metrics": [{"Name": name, "Unit": METRIC_UNITS[name]} for name in metrics],
                }
            ],
        },
        **{name: str(dimensions[name]) for name in DIMENSIONS},
        **{name: float(value) for name, value in metrics.items()},
    }
