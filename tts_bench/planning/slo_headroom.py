"""W_max, the queueing headroom an SLO leaves over one uncontended request (SPEC §6).

The one definition both ends of the chain use: `plan` judges an SLO by it (`slo_feasibility`
stops at W_max ≤ 0, `slo_budget` warns below one service time), and the main job calibrates
its local SLO with it, so that a slow machine cannot calibrate an SLO the plan then refuses.
S_p95 is the end-to-end latency p95 of an uncontended request, not its TTFAB: the plan
reads it from the c=1 rung, the calibration from its one-at-a-time requests.
"""

from __future__ import annotations

import math

from tts_bench.planning.rounding import round9

# The headroom a local SLO is calibrated to leave: one request may wait behind one other and
# still meet it (the `slo_budget` finding's own condition, W_max ≥ S_p95).
CALIBRATED_WAITS = 1.0


def queueing_headroom_s(slo_ms: float, service_p95_s: float) -> float:
    """W_max = SLO − S_p95, in seconds."""
    return round9(slo_ms / 1000 - service_p95_s)


def headroom_feasible(w_max_s: float) -> bool:
    """An SLO one uncontended request already misses (W_max ≤ 0) cannot be planned for."""
    return w_max_s > 0


def headroom_covers_a_wait(w_max_s: float, service_p95_s: float) -> bool:
    """W_max covers one uncontended service time: a request that waits behind another can
    still meet the SLO."""
    return w_max_s >= service_p95_s


def slo_with_headroom_ms(service_p95_s: float, waits: float = CALIBRATED_WAITS) -> float:
    """The smallest SLO, rounded up to 100 ms, whose W_max covers `waits` service times."""
    return math.ceil(round9((1 + waits) * service_p95_s * 10)) * 100.0
