"""Closed-loop samples built by arithmetic, for testing the statistics without a server."""

from __future__ import annotations

from tts_bench.measure.samples import Outcome, Sample


def closed_loop(
    users: int,
    start: float,
    end: float,
    latency_ms: float,
    gap_ms: float = 0.0,
    ttfab_share: float = 0.4,
    rung: int | None = None,
    worker: str = "host:1",
    fail_every: int = 0,
) -> list[Sample]:
    """`users` users each sending back to back (plus `gap_ms` between requests) over [start, end)."""
    out: list[Sample] = []
    count = 0
    for u in range(users):
        t = start + u * 0.001
        k = 0
        while t < end:
            # Vary latency a little, deterministically, so percentiles differ from the mean.
            lat = latency_ms * (1 + 0.1 * ((u * 7 + k * 3) % 5))
            count += 1
            failed = fail_every and count % fail_every == 0
            out.append(
                Sample(
                    rung=users if rung is None else rung,
                    worker=worker,
                    start=t,
                    end=t + lat / 1000,
                    ttfab_ms=None if failed else lat * ttfab_share,
                    latency_ms=lat,
                    outcome=Outcome.ERROR if failed else Outcome.OK,
                    detail="HTTP 500" if failed else "",
                )
            )
            t += (lat + gap_ms) / 1000
            k += 1
    return out


def serial_queue_ttfab_ms(users: int, count: int, rng, first_share: float = 0.3):
    """TTFABs (ms, in the order they ended) of `count` requests from `users` closed-loop users
    of one FIFO server with lognormal service times about 100 ms: request k arrives when the
    user's previous one ends, so it waits for the `users − 1` served before it, and hears its
    first audio `first_share` into its own service. Neighbours share most of their wait."""
    import numpy as np

    service = rng.lognormal(np.log(0.1), 0.35, count + users)
    ends = np.concatenate([[0.0], np.cumsum(service)])
    k = np.arange(count)
    wait = ends[users - 1 + k] - ends[k]
    return (wait + first_share * service[users - 1 + k]) * 1000
