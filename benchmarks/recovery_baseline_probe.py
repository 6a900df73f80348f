"""Record the T_total probe's requests at 2 users on one server, quiet and then beside CPU burners.

The main job judges T_total's recovery against 1.5 × its ladder's c=2 p95; when the machine's
load rises between the ladder and T_total, the probe can stay above that bound however well the
new instance starts. This records the figures the recovery baseline's unit test replays
(`tests/ladder/test_chain_rules.py`): one phase quiet (the ladder's hour), one beside `--burners`
Python loops (a busier hour), each request's start, end and TTFAB.

    PYTHONPATH=$PWD:$PWD/container .venv/bin/python benchmarks/recovery_baseline_probe.py \
        --quiet-s 60 --busy-s 150 --burners 2 --out tests/ladder/recorded/recovery-probe.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from pathlib import Path

from tests.servers import ServerProcess
from tts_bench.measure.corpus import DEFAULT_CORPUS, load_corpus
from tts_bench.measure.ttotal.probe import Probe, ProbeSample, speak


def burn() -> None:
    while True:
        pass


def phase(url: str, users: int, seconds: float) -> list[ProbeSample]:
    utterances = load_corpus(DEFAULT_CORPUS)
    probe = Probe(lambda u: speak(url, u), utterances, users).start()
    time.sleep(seconds)
    probe.stop()
    return list(probe.samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet-s", type=float, default=60.0)
    parser.add_argument("--busy-s", type=float, default=150.0)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--users", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    server = ServerProcess()
    try:
        server.wait_ready()
        phase(server.url, args.users, 5.0)  # warm the engine and the connections
        record: dict[str, object] = {"users": args.users, "load_before": os.getloadavg()[0]}
        record["quiet"] = phase(server.url, args.users, args.quiet_s)
        burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.burners)]
        for b in burners:
            b.start()
        try:
            time.sleep(3.0)  # the burners take the cores first
            record["busy"] = phase(server.url, args.users, args.busy_s)
            record["load_busy"] = os.getloadavg()[0]
        finally:
            for b in burners:
                b.terminate()
    finally:
        server.stop()
    for key in ("quiet", "busy"):
        record[key] = [
            {"start": s.start, "end": s.end, "ttfab_ms": s.ttfab_ms}
            for s in record[key]  # type: ignore[attr-defined]
        ]
    record["burners"] = args.burners
    record["recorded"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
