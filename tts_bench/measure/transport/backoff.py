"""How long a refused ladder user waits before its next request: jittered exponential backoff.

A closed-loop user sends its next request the moment the last one ends. Against a container
that refuses at capacity instead of queueing (Sonic-3 answers 429 at once), the user past the
slots would then be refused in a tight loop: about 1,500 refusals a second at c=5 against the
stand-in, load on the client and the endpoint that no real client sends. So a refused user
waits: the k-th refusal in a row waits a draw from the upper half of min(CAP_S, BASE_S · 2^(k-1))
("equal jitter": at least half the step, so the wait grows; the rest random, so refused users
do not retry in step). A request that is not refused resets the count. No other outcome waits:
an error or a cancelled request is not the server saying "later".
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

from tts_bench.measure.transport.stream_events import Outcome

BASE_S: Final = 0.05  # the first refusal waits 25-50 ms
CAP_S: Final = 1.0  # from the sixth in a row on, 0.5-1 s


def backoff_s(consecutive: int, draw: float) -> float:
    """The wait after `consecutive` refusals in a row, `draw` uniform in [0, 1)."""
    if consecutive <= 0:
        return 0.0
    step = min(CAP_S, BASE_S * 2.0 ** min(consecutive - 1, 32))
    return step * (0.5 + 0.5 * draw)


class RefusalBackoff:
    """One user's count of refusals in a row, and its next wait."""

    def __init__(self, draw: Callable[[], float] = random.random) -> None:
        self.consecutive = 0
        self._draw = draw

    def after(self, outcome: Outcome) -> float:
        """Seconds to wait before the next request, given how the last one ended."""
        self.consecutive = self.consecutive + 1 if outcome is Outcome.REJECTED else 0
        return backoff_s(self.consecutive, self._draw())
