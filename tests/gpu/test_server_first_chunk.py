"""The server's own first-chunk latency travels from its done event to the rung's p95, and the
G2P table the GPU benchmark uses gives the engine what the live G2P gives it."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from tts_server.engine.base import EngineError
from tts_server.engine.g2p import Phonemizer, g2p_tokens, load_table
from tts_server.protocol import done_event

from tts_bench.measure.ladder.statistics import rung_statistics
from tts_bench.measure.samples import Outcome, Sample, read_samples, write_samples


def test_the_done_event_carries_the_server_first_chunk_latency_only_when_known() -> None:
    assert done_event("c", 12.34567)["first_chunk_latency_ms"] == 12.346
    assert "first_chunk_latency_ms" not in done_event("c")


def test_rung_statistics_take_the_p95_of_the_server_first_chunk_latency() -> None:
    server_ms = [float(v) for v in range(10, 110, 5)]
    samples = [
        Sample(4, "h:1", 20.0 + i / 10, 20.5 + i / 10, 900.0, 1000.0, Outcome.OK, "", ms)
        for i, ms in enumerate(server_ms)
    ]
    rung = rung_statistics(samples, [], 4, (20.0, 30.0), slo_ms=3000)
    assert rung.server_first_chunk_p95_ms == np.percentile(server_ms, 95)
    older = [Sample(4, "h:1", 21.0, 21.5, 900.0, 1000.0, Outcome.OK)]  # no server figure
    assert rung_statistics(older, [], 4, (20.0, 30.0), 3000).server_first_chunk_p95_ms is None


def test_sample_files_from_before_the_server_figure_still_read(tmp_path) -> None:
    path = tmp_path / "old.samples.csv.gz"
    header = "rung,worker,start,end,ttfab_ms,latency_ms,outcome,detail\n"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(header + "1,h:1,1.0,2.0,100.0,1000.0,ok,\n")
    (sample,) = read_samples(path)
    assert sample.server_first_chunk_ms is None and sample.ttfab_ms == 100.0
    again = tmp_path / "new.samples.csv.gz"
    write_samples(again, [Sample(1, "h:1", 1.0, 2.0, 100.0, 1000.0, Outcome.OK, "", 42.5)])
    assert read_samples(again)[0].server_first_chunk_ms == 42.5
    wire = Sample.from_wire(Sample(1, "h:1", 1.0, 2.0, None, 5.0, Outcome.OK, "", 7.0).to_wire())
    assert wire.server_first_chunk_ms == 7.0


@pytest.mark.slow
def test_a_g2p_table_gives_the_same_phonemes_and_words_as_the_live_g2p(tmp_path) -> None:
    vocab = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyzæðŋɑɔəɛɪʊʌʃʒθˈˌːɹOAIWY,.?! ", 1)}
    text = "Your order has shipped, thank you."
    table_path = tmp_path / "table.json"
    table_path.write_text(json.dumps({"en": {text: [list(t) for t in g2p_tokens("en", text)]}}))
    from_table = Phonemizer(vocab, table=load_table(table_path))
    assert from_table.phonemize(text, "en") == Phonemizer(vocab).phonemize(text, "en")
    with pytest.raises(EngineError, match="not in the G2P table"):
        from_table.phonemize("Something else.", "en")
