"""`gpu_bench.py served` on run 6's committed batched ladder: both Q_max, stalls, bytes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.gpu_bench import served

RUN6 = (
    Path(__file__).resolve().parents[2]
    / "measurements"
    / "qmax-kokoro-82m-local-http-localnvidiah200-e85b56e3-47ee6d.json"
)


def test_served_reads_both_q_max_and_the_audio_each_stream_received(tmp_path: Path) -> None:
    out = tmp_path / "served.jsonl"
    args = argparse.Namespace(artifacts=[RUN6], underrun_slo=0.05, mean_audio_s=4.69, out=out)
    assert served(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[-1] == {"artifact": RUN6.name, "q_max_ttfab": 571, "q_max_stall_aware": 547}
    at = {row["c"]: row for row in rows[:-1]}
    assert round(at[571]["underrun_share"], 3) == 0.074  # 7.4 % stalled: past the 5 %
    assert at[571]["served_audio_s_per_s"] == 1200.5  # summed from the audio received
    assert at[571]["derived_audio_s_per_s"] == round(at[571]["rps"] * 4.69, 1)
