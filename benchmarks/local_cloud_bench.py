"""Local-cloud overhead benchmark: TTFAB through the local cloud against the same container direct.

Not a test: it prints figures. It starts `tts-bench local-cloud` (one onnx instance) as a child
process, then measures time to first audio byte (TTFAB: request sent → the first complete
`chunk` event received) two ways against the same instance, in alternating blocks so that a
change in the machine's load hits both alike:
- direct: a streaming HTTP POST to the instance's `/invocations` (urllib3);
- through the cloud: boto3 `invoke_endpoint_with_response_stream` at the runtime, the
  PayloadParts re-joined until the first complete `chunk` line.
At concurrency 1 and at `--high` (closed loop: c clients, each one request at a time). The
ratio is cloud / direct (1.00 = no overhead; the target is <= 1.05 at p50). The runtime's own
CPU per request is the local-cloud process's CPU time (user + system, its instance child not
included: moto, the runtime, log shipping, metrics, autoscaling) over the through-cloud
blocks, divided by their requests.

    PYTHONPATH=.:container python benchmarks/local_cloud_bench.py [--high 4] [--blocks 6]
        [--per-block 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import boto3
import urllib3
from botocore.config import Config

REPO = Path(__file__).resolve().parents[1]
TEXT = "Thank you for calling. How can I help you today?"


def body(context_id: str) -> bytes:
    return json.dumps(
        {
            "context_id": context_id,
            "transcript": TEXT,
            "language": "en",
            "voice": {"mode": "id", "id": "jf_alpha"},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        }
    ).encode()


def _first_chunk(buffer: bytes) -> bool:
    return any(b'"type":"chunk"' in line for line in buffer.split(b"\n")[:-1])


def direct_ttfab(pool: urllib3.PoolManager, url: str, context_id: str) -> float:
    started = time.perf_counter()
    answer = pool.request(
        "POST",
        f"{url}/invocations",
        body=body(context_id),
        headers={"Content-Type": "application/json"},
        preload_content=False,
    )
    buffer, ttfab = b"", None
    for data in answer.stream(4096, decode_content=False):
        buffer += data
        if ttfab is None and _first_chunk(buffer):
            ttfab = time.perf_counter() - started
    answer.release_conn()
    if ttfab is None:
        raise RuntimeError(f"no chunk event: {buffer[-300:]!r}")
    return ttfab


def cloud_ttfab(client: object, endpoint: str, context_id: str) -> float:
    started = time.perf_counter()
    answer = client.invoke_endpoint_with_response_stream(  # type: ignore[attr-defined]
        EndpointName=endpoint, Body=body(context_id), ContentType="application/json"
    )
    buffer, ttfab = b"", None
    for event in answer["Body"]:
        buffer += event.get("PayloadPart", {}).get("Bytes", b"")
        if ttfab is None and _first_chunk(buffer):
            ttfab = time.perf_counter() - started
    if ttfab is None:
        raise RuntimeError(f"no chunk event: {buffer[-300:]!r}")
    return ttfab


STOP_WAIT_S = 120.0  # its instance drains (up to the server's deadline), then it exits
FAILURES: list[str] = []  # requests that failed (a loaded machine can pass the 58 s deadline)


def closed_loop(
    one: Callable[[str], float], clients: int, per_client: int, tag: str
) -> list[float]:
    samples: list[float] = []
    lock = threading.Lock()

    def client(index: int) -> None:
        for n in range(per_client):
            try:
                value = one(f"{tag}-{index}-{n}")
            except Exception as exc:
                with lock:
                    FAILURES.append(f"{tag}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            with lock:
                samples.append(value)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(cloud: subprocess.Popen[bytes], stderr_path: Path) -> float:
    """SIGTERM the local cloud as a user's Ctrl-C would and wait for its own clean stop (it
    drains its instance, then stops moto and the runtime); how long that took is reported."""
    started = time.perf_counter()
    cloud.terminate()
    try:
        cloud.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        cloud.kill()
        cloud.wait()
        tail = stderr_path.read_text()[-1500:]
        print(f"the local cloud did not stop within {STOP_WAIT_S:.0f} s of SIGTERM; killed it. "
              f"Its last output:\n{tail}", file=sys.stderr)  # fmt: skip
    return time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--high", type=int, default=4, help="the high concurrency (local Q_max)")
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks per path")
    parser.add_argument("--per-block", type=int, default=5, help="requests per client per block")
    args = parser.parse_args()

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "container")])
    with tempfile.TemporaryDirectory() as tmp:
        env_file = Path(tmp) / "cloud.env"
        stderr_path = Path(tmp) / "cloud.err"
        with open(stderr_path, "w") as stderr:
            cloud = subprocess.Popen(
                [
                    sys.executable, "-m", "tts_bench", "local-cloud", "--instances", "1",
                    "--env-file", str(env_file), "--server-args", "--backend onnx",
                ],
                stdout=subprocess.DEVNULL, stderr=stderr, env=env,
            )  # fmt: skip
        try:
            while not env_file.exists():
                if cloud.poll() is not None:
                    raise SystemExit(stderr_path.read_text()[-2000:])
                time.sleep(0.5)
            values = dict(line.split("=", 1) for line in env_file.read_text().split())
            log = stderr_path.read_text()
            instance_url = re.findall(r"InService at (http://127\.0\.0\.1:\d+)", log)[-1]
            endpoint = re.findall(r"endpoint (\S+) is InService", log)[-1]
            client = boto3.client(
                "sagemaker-runtime",
                endpoint_url=values["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"],
                region_name=values["AWS_REGION"],
                aws_access_key_id=values["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=values["AWS_SECRET_ACCESS_KEY"],
                config=Config(max_pool_connections=64, retries={"max_attempts": 1}),
            )
            pool = urllib3.PoolManager(maxsize=64)
            paths: dict[str, Callable[[str], float]] = {
                "direct": lambda cid: direct_ttfab(pool, instance_url, cid),
                "cloud": lambda cid: cloud_ttfab(client, endpoint, cid),
            }
            for name, one in paths.items():  # warm both paths (connections, onnx shapes)
                closed_loop(one, 2, 2, f"warm-{name}")
            rows = []
            for clients in (1, args.high):
                samples: dict[str, list[float]] = {"direct": [], "cloud": []}
                cloud_cpu_s, cloud_requests = 0.0, 0
                for block in range(args.blocks):
                    order = ("direct", "cloud") if block % 2 == 0 else ("cloud", "direct")
                    for name in order:
                        before = cpu_s(cloud.pid)
                        got = closed_loop(paths[name], clients, args.per_block, f"{name}-{block}")
                        if name == "cloud":
                            cloud_cpu_s += cpu_s(cloud.pid) - before
                            cloud_requests += len(got)
                        samples[name] += got
                rows.append((clients, samples, cloud_cpu_s / cloud_requests))
        finally:
            stopped_in_s = stop(cloud, stderr_path)

    print(f"TTFAB, {TEXT!r}, one onnx instance; cloud / direct (1.00 = no overhead)")
    print("| c | n per path | direct p50 ms | cloud p50 ms | ratio p50 | direct p95 ms | "
          "cloud p95 ms | ratio p95 | runtime CPU ms/request |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for clients, samples, cpu_per_request in rows:
        d, c = samples["direct"], samples["cloud"]
        print(
            f"| {clients} | {len(d)} | {pct(d, 0.5) * 1e3:.0f} | {pct(c, 0.5) * 1e3:.0f} | "
            f"{pct(c, 0.5) / pct(d, 0.5):.3f} | {pct(d, 0.95) * 1e3:.0f} | "
            f"{pct(c, 0.95) * 1e3:.0f} | {pct(c, 0.95) / pct(d, 0.95):.3f} | "
            f"{cpu_per_request * 1e3:.1f} |"
        )
        print(
            f"  (means: direct {statistics.mean(d) * 1e3:.0f} ms, cloud {statistics.mean(c) * 1e3:.0f} ms)"
        )
    print(f"the local cloud stopped {stopped_in_s:.1f} s after SIGTERM")
    if FAILURES:
        print(f"{len(FAILURES)} failed request(s), left out of the figures:")
        for failure in FAILURES[:5]:
            print(f"  {failure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
