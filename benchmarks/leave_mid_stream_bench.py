"""Benchmark: a client leaves a long stream after its first line; how soon is the container free,
and how soon does the next request's first byte come, straight to the container and through the
local cloud's response stream (boto3)?

Starts a local cloud (one onnx instance), then per round and per way: a long request, its first
line read, the connection closed; the time until the container's `/ping` shows nothing in
flight ("freed"); then the same leave followed at once by a short request, timed to its first
byte ("next TTFAB"). Medians over the rounds, cloud / direct as ratios. To measure another
checkout's runtime, run this file with that checkout first on PYTHONPATH.

    PYTHONPATH=.:container python benchmarks/leave_mid_stream_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from tts_bench.local_cloud import LocalCloudSettings, local_cloud

LONG_TEXT = " ".join(f"This is sentence {i}." for i in range(1, 170))


def request(context_id: str, transcript: str) -> bytes:
    return json.dumps(
        {
            "context_id": context_id,
            "transcript": transcript,
            "language": "en",
            "voice": {"mode": "id", "id": "jf_alpha"},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        }
    ).encode()


def in_flight(url: str) -> int:
    with urllib.request.urlopen(f"{url}/ping", timeout=10) as answer:
        return int(json.loads(answer.read())["in_flight"])


def wait_free(url: str) -> None:
    while in_flight(url):
        time.sleep(0.01)


class Direct:
    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)

    def _post(self, body: bytes) -> tuple[http.client.HTTPConnection, Any]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
        connection.request("POST", "/invocations", body, {"Content-Type": "application/json"})
        return connection, connection.getresponse()

    def leave(self, context_id: str) -> float:
        connection, answer = self._post(request(context_id, LONG_TEXT))
        answer.readline()
        connection.close()
        return time.perf_counter()

    def next_ttfab_s(self, context_id: str) -> float:
        started = time.perf_counter()
        connection, answer = self._post(request(context_id, "Sure."))
        answer.readline()
        ttfab = time.perf_counter() - started
        answer.read()
        connection.close()
        return ttfab


class Cloud:
    def __init__(self, client: Any, endpoint: str) -> None:
        self.client, self.endpoint = client, endpoint

    def _stream(self, body: bytes) -> Any:
        return self.client.invoke_endpoint_with_response_stream(
            EndpointName=self.endpoint, Body=body, ContentType="application/json"
        )["Body"]

    def leave(self, context_id: str) -> float:
        body = self._stream(request(context_id, LONG_TEXT))
        next(iter(body))
        body.close()
        return time.perf_counter()

    def next_ttfab_s(self, context_id: str) -> float:
        started = time.perf_counter()
        body = self._stream(request(context_id, "Sure."))
        events = iter(body)
        next(events)
        ttfab = time.perf_counter() - started
        for _ in events:
            pass
        return ttfab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    settings = LocalCloudSettings(server_args=("--backend", "onnx"), instances=1)
    with local_cloud(settings) as cloud:
        url = cloud.fleet.in_service()[0].url
        ways: dict[str, Direct | Cloud] = {
            "direct": Direct(url),
            "cloud": Cloud(cloud.client("sagemaker-runtime"), cloud.endpoint_name),
        }
        ways["cloud"].next_ttfab_s("warm")
        print(f"load average {os.getloadavg()[0]:.1f} before")
        freed: dict[str, list[float]] = {way: [] for way in ways}
        ttfab: dict[str, list[float]] = {way: [] for way in ways}
        for round_ in range(args.rounds):
            for name, way in ways.items():
                left_at = way.leave(f"{name}-free-{round_}")
                wait_free(url)
                freed[name].append(time.perf_counter() - left_at)
                way.leave(f"{name}-leave-{round_}")
                ttfab[name].append(way.next_ttfab_s(f"{name}-next-{round_}"))
                wait_free(url)
        print(f"load average {os.getloadavg()[0]:.1f} after")
    median: Callable[[list[float]], float] = statistics.median
    print(f"| {args.rounds} rounds, medians | direct | cloud | cloud / direct |")
    print("|---|---:|---:|---:|")
    for label, figures in (("container freed after the client left, ms", freed),
                           ("next request's TTFAB, ms", ttfab)):  # fmt: skip
        direct, through = median(figures["direct"]) * 1000, median(figures["cloud"]) * 1000
        print(f"| {label} | {direct:.0f} | {through:.0f} | {through / direct:.2f} |")


if __name__ == "__main__":
    main()
