"""What one retained 1-minute aggregate costs in the local cloud's moto (issue 40's soak).

Not a test: it prints figures. One series of 10 s datapoints is put through the CloudWatch API
for 30 hours of a clock the script moves; past 3 hours they roll up into 1-minute aggregates
(`cloudwatch/metric_retention.py`). The traced bytes and Python blocks added between hour 10 and
hour 30, divided by the datapoints added, are one aggregate's cost; times the curve cloud's
series and its clock compression, the growth a soak must expect from retention alone.

    PYTHONPATH=.:container python benchmarks/retention_cost.py [--series 6] [--time-scale 60]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from datetime import timedelta
from typing import Any, cast

from tests.local_cloud import test_metric_retention as retention
from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.control_plane.moto_host import MotoHost


def put(moto: MotoHost, clock: retention.MovedClock, hours: range) -> None:
    cloudwatch = retention.client(moto, "cloudwatch")
    cloudwatch.meta.config.disable_request_compression = True  # the guard reads JSON bodies only
    for first in range(hours.start * 360, hours.stop * 360, 60):
        data: list[Any] = [
            {**retention.NAME, "Dimensions": retention.DIMENSIONS, "StorageResolution": 1,
             "Timestamp": retention.START + timedelta(seconds=10 * i), "Value": retention.value_at(i)}
            for i in range(first, first + 60)
        ]  # fmt: skip
        clock.at = retention.START + timedelta(seconds=10 * (first + 60))
        cloudwatch.put_metric_data(Namespace=retention.NAMESPACE, MetricData=data)


def reading(moto: MotoHost) -> tuple[int, int, int]:
    """(traced bytes, datapoints moto holds, Python blocks) after a collection."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0], len(retention.stored(moto)), sys.getallocatedblocks()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=6, help="metric series the cloud publishes")
    parser.add_argument("--time-scale", type=float, default=60.0, help="the soak's compression")
    args = parser.parse_args()
    clock = retention.MovedClock()
    moto = MotoHost(clock=cast(ServiceClock, clock))
    moto.start()
    tracemalloc.start()
    try:
        put(moto, clock, range(0, 10))
        bytes_a, held_a, blocks_a = reading(moto)
        put(moto, clock, range(10, 30))
        bytes_b, held_b, blocks_b = reading(moto)
    finally:
        moto.stop()
    added = held_b - held_a
    per_bytes, per_blocks = (bytes_b - bytes_a) / added, (blocks_b - blocks_a) / added
    per_wall_minute = args.series * args.time_scale  # one aggregate per series per clock minute
    print(f"datapoints held: {held_a} at 10 h, {held_b} at 30 h of the clock")
    print(f"one aggregate: {per_bytes:.0f} bytes, {per_blocks:.1f} Python blocks")
    print(
        f"{args.series} series at --time-scale {args.time_scale:g}: {per_wall_minute:.0f} aggregates "
        f"a wall minute, {per_wall_minute * per_bytes / 2**20:.2f} MiB and "
        f"{per_wall_minute * per_blocks:.0f} blocks a wall minute from retention alone"
    )


if __name__ == "__main__":
    main()
