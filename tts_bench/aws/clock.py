"""The clock that AWS timestamps are read in: wall time on AWS, virtual time on a compressed
local cloud.

The local cloud may compress time (`tts-bench local-cloud --time-scale K`): metric periods,
alarm evaluation, cooldowns and instance start-up then pass K times faster than the wall clock.
Every timestamp it hands out (CloudWatch datapoints, alarm history, scaling activities, log
events and log-stream creation, start-up markers) is in its *virtual* time,

    virtual = origin + K × (wall − origin),

so a 10 s datapoint is stamped on a 10 s boundary, a 60 s alarm period still reads as 60 s,
and a compressed run reads minute for minute like the uncompressed one it stands for. A
client that compares its own readings with those timestamps converts its wall clock with
`ServiceClock.from_environment()`: the local cloud exports K and the origin in two variables;
without them (AWS) the clock is the wall clock.

Why virtual timestamps rather than compressed real ones: CloudWatch accepts high-resolution
periods of 1, 5, 10 and 30 s and multiples of 60 s only, so compressed periods would limit K
to 1, 2 and 10 for the 10 s metric and break every 60 s alarm period (60/K s) already at
K = 10; virtual timestamps keep every period as deployed, for any K.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from tts_bench.errors import TtsBenchError

ENV_TIME_SCALE: Final = "TTS_BENCH_TIME_SCALE"
ENV_TIME_ORIGIN: Final = "TTS_BENCH_TIME_ORIGIN"
# Seconds from a high-resolution datapoint's period end until it can be read (GetMetricData) and
# an alarm sees it. An assumption: AWS documents that alarms with 10 s or 30 s periods are
# evaluated every 10 s, not how soon such a datapoint is readable; the one figure found is "a few
# seconds" (an answer on AWS re:Post, not AWS documentation). The local cloud's default.
CLOUDWATCH_DELAY_S: Final = 5.0


class ClockError(TtsBenchError):
    """The time-scale variables are not numbers a clock can run on."""


@dataclass(frozen=True, slots=True)
class ServiceClock:
    """Wall time mapped to the service's time: `scale` virtual seconds per wall second,
    equal to the wall clock at `origin_s` (unix seconds)."""

    scale: float = 1.0
    origin_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ClockError(f"time scale {self.scale!r}: give a positive number")
        if not math.isfinite(self.origin_s):
            raise ClockError(f"time origin {self.origin_s!r}: give unix seconds")

    @classmethod
    def starting_now(cls, scale: float) -> ServiceClock:
        return cls(scale=scale, origin_s=time.time())

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> ServiceClock:
        """The local cloud's clock from its exported variables; the wall clock without them."""
        env = os.environ if env is None else env
        raw_scale, raw_origin = env.get(ENV_TIME_SCALE), env.get(ENV_TIME_ORIGIN)
        if raw_scale is None and raw_origin is None:
            return cls()
        if raw_scale is None or raw_origin is None:
            raise ClockError(
                f"{ENV_TIME_SCALE} and {ENV_TIME_ORIGIN} come together (the local cloud's env "
                "file sets both); set both or neither"
            )
        try:
            return cls(scale=float(raw_scale), origin_s=float(raw_origin))
        except ValueError:
            raise ClockError(
                f"{ENV_TIME_SCALE}={raw_scale!r}, {ENV_TIME_ORIGIN}={raw_origin!r}: not numbers"
            ) from None

    @property
    def compressed(self) -> bool:
        return self.scale != 1.0

    def env(self) -> dict[str, str]:
        """The two variables a client needs to read this clock."""
        return {ENV_TIME_SCALE: f"{self.scale:g}", ENV_TIME_ORIGIN: f"{self.origin_s:.6f}"}

    def to_virtual(self, wall_s: float) -> float:
        return self.origin_s + self.scale * (wall_s - self.origin_s)

    def to_wall(self, virtual_s: float) -> float:
        return self.origin_s + (virtual_s - self.origin_s) / self.scale

    def wall_seconds(self, virtual_s: float) -> float:
        """How long `virtual_s` of the service's time lasts on the wall clock."""
        return virtual_s / self.scale

    def now(self) -> float:
        """The service's time now, unix seconds."""
        return self.to_virtual(time.time())

    def now_datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now(), tz=UTC)


def service_clock(time_scale: float | None, emulated: bool) -> ServiceClock:
    """The clock an endpoint's timestamps are in (`from_environment`), checked: a `time_scale`
    given must be that clock's, and an endpoint on AWS runs at 1."""
    clock = ServiceClock.from_environment()
    if time_scale is not None and time_scale != clock.scale:
        raise ClockError(
            f"--time-scale {time_scale:g}: the endpoint's clock runs at {clock.scale:g} (the local "
            f"cloud's env file sets {ENV_TIME_SCALE}); drop the flag or start the cloud with it"
        )
    if not emulated and clock.compressed:
        raise ClockError(
            f"the time scale is {clock.scale:g} but the endpoint runs on AWS, whose clocks run at "
            f"1: unset {ENV_TIME_SCALE} and {ENV_TIME_ORIGIN}"
        )
    return clock
