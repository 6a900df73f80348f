"""CloudWatch units: a metric read as one statistic over a period, and a threshold's units.

A ratio of CloudWatch's figure to the client's belongs to one statistic and period
(`CloudWatchStat`); a deployed threshold records the units it is in and the ratio that
converted it (`CloudWatchUnits`).
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    PositiveFloat,
    PositiveInt,
)

from tts_bench.strict import StrictModel as _Strict

# --------------------------------------------------------------------------- CloudWatch units

# The SageMaker metrics (AWS/SageMaker) a plan may deploy scaling on, and their statistics.
MetricName = Literal["ConcurrentRequestsPerModel", "InvocationsPerInstance"]
Statistic = Literal["Maximum", "Average", "Minimum", "Sum"]


class CloudWatchStat(BaseModel):
    """A CloudWatch metric read as one statistic over a period: the units a threshold is in.

    ConcurrentRequestsPerModel read as its 10 s Maximum is another number than its 60 s
    Average for the same load, so a ratio, and a threshold converted by it, belongs to one.
    Keys name the metric unless it is ConcurrentRequestsPerModel (``Maximum/10s``,
    ``InvocationsPerInstance:Sum/60s``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: MetricName = "ConcurrentRequestsPerModel"
    statistic: Statistic
    period_s: PositiveInt

    @property
    def key(self) -> str:
        """How ratios are keyed in artifacts, e.g. ``Maximum/10s``."""
        stat = f"{self.statistic}/{self.period_s}s"
        return stat if self.metric == "ConcurrentRequestsPerModel" else f"{self.metric}:{stat}"

    @classmethod
    def parse(cls, key: str) -> CloudWatchStat:
        metric, _, stat = key.rpartition(":")
        statistic, _, period = stat.partition("/")
        if not period.endswith("s") or not period[:-1].isdigit():
            raise ValueError(f"a statistic key looks like Maximum/10s, got {key!r}")
        return cls(
            metric=metric or "ConcurrentRequestsPerModel",  # type: ignore[arg-type]
            statistic=statistic,  # type: ignore[arg-type]
            period_s=int(period[:-1]),
        )


# What the ladder's per-rung `cloudwatch_ratio` was always measured against (SPEC §4).
LADDER_RATIO_STAT: Final = CloudWatchStat(statistic="Maximum", period_s=10)
# What the fleet rule deploys on, joined per rung in `cloudwatch_ratios` under its key.
INVOCATIONS_RATIO_STAT: Final = CloudWatchStat(
    metric="InvocationsPerInstance", statistic="Sum", period_s=60
)


def ratio_keys(ratios: dict[str, float]) -> dict[str, float]:
    for key in ratios:
        CloudWatchStat.parse(key)
    return ratios


class CloudWatchUnits(_Strict):
    """The units one threshold is deployed in: the metric, statistic and period its alarm
    evaluates, and the CloudWatch/client ratio that converted it, with the rule that chose it."""

    metric: MetricName = "ConcurrentRequestsPerModel"
    statistic: Statistic
    period_s: PositiveInt
    cw_ratio: PositiveFloat
    ratio_rule: Literal[
        "verification-rung",  # measured by a verification rung held at this point
        "ladder-rung",  # a ladder rung sits exactly at this point
        "smaller-bracketing",  # the smaller ratio of the two rungs either side
        "nearest-rung",  # beyond the measured rungs: the nearest one's
        "smallest-rung",  # a count per request: the smallest ratio any rung measured
        "by-definition",  # AWS defines the metric as the client's figure (a reference run)
        "local-no-cloudwatch",  # a local transport has no CloudWatch: 1.0 by construction
        "unmeasured",  # a SageMaker transport without a measured ratio: a stop
    ]

    @property
    def stat(self) -> CloudWatchStat:
        return CloudWatchStat(metric=self.metric, statistic=self.statistic, period_s=self.period_s)

    def of(self, client_figure: float) -> float:
        """A client-side figure (concurrency, or requests per period) in these units: times
        the ratio, rounded to 9 places (SPEC §6's float-noise rule)."""
        return round(client_figure * self.cw_ratio, 9)
