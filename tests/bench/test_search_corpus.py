"""`bench search` writes its generated corpus whole or not at all: a later run reuses only a finished one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench_search(load_bench):
    return load_bench("search")


def test_the_corpus_appears_only_when_complete(bench_search, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = bench_search._vocabulary(np.random.default_rng(0), 2000)
    corpus = tmp_path / "zipf-120-seed0.jsonl"
    bench_search.write_corpus(corpus, 120, vocab, 0)
    lines = corpus.read_text().splitlines()
    assert len(lines) == 120 and all(json.loads(line)["contents"].startswith('"') for line in lines)
    assert list(tmp_path.iterdir()) == [corpus]

    real_rng = np.random.default_rng

    class StoppedAfterOneChunk:  # the generator of a run stopped (Ctrl-C) after the first 50,000 lines
        def __init__(self, seed: int) -> None:
            self.rng, self.calls = real_rng(seed), 0

        def integers(self, *args, **kwargs):
            self.calls += 1
            if self.calls == 5:  # 2 draws make the sentence pools, 2 draw each chunk
                raise KeyboardInterrupt
            return self.rng.integers(*args, **kwargs)

    monkeypatch.setattr(bench_search.np.random, "default_rng", StoppedAfterOneChunk)
    stopped = tmp_path / "zipf-120000-seed0.jsonl"
    with pytest.raises(KeyboardInterrupt):
        bench_search.write_corpus(stopped, 120_000, vocab, 0)
    assert not stopped.exists()  # the next run generates it again instead of indexing a third of it
    assert len((tmp_path / "zipf-120000-seed0.jsonl.partial").read_text().splitlines()) == 50_000


def test_the_calibration_builds_the_first_passages_and_leaves_no_index(bench_search, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = bench_search._vocabulary(np.random.default_rng(0), 2000)
    corpus = tmp_path / "zipf-3000-seed0.jsonl"
    bench_search.write_corpus(corpus, 3000, vocab, 0)
    built = []
    real_build = bench_search.build_index

    def recording_build(docs, out_dir, stats, *args, **kwargs):
        result = real_build(docs, out_dir, stats, *args, **kwargs)
        built.append((stats.documents, stats.lines, stats.seconds))
        return result

    monkeypatch.setattr(bench_search, "CALIBRATION_DOCS", 1000)
    monkeypatch.setattr(bench_search, "build_index", recording_build)
    rate = bench_search.calibration_docs_per_s(corpus, tmp_path)
    [(documents, lines, seconds)] = built
    assert documents == lines == 1000  # the corpus's first 1,000 passages, not all 3,000
    assert rate == pytest.approx(1000 / seconds, rel=1e-3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [corpus.name]  # the calibration index is gone


def test_the_latency_split_names_the_stage_that_slowed(bench_search, tmp_path: Path) -> None:
    """Each step of a query (search, document fetch, snippet) is timed on its own, so a slower fetch shows in
    ``stage_ms["doc_fetch"]`` and nowhere else: a regression names its stage."""
    vocab = bench_search._vocabulary(np.random.default_rng(0), 2000)
    corpus = tmp_path / "zipf-2000-seed0.jsonl"
    bench_search.write_corpus(corpus, 2000, vocab, 0)
    bench_search.build_index(bench_search.read_corpus(corpus), tmp_path / "index")
    index = bench_search.LocalIndex(tmp_path / "index")
    queries = [f"{vocab[i]} {vocab[i + 1]}" for i in range(0, 160, 2)]
    before = bench_search.measure_queries(index, queries, 10)
    stages = before["stage_ms"]
    assert list(stages) == ["search", "doc_fetch", "snippet"]
    for split in stages.values():
        assert set(split) == {"mean", "p50", "p99", "cpu_mean", "disk_faults_per_query"}
        assert 0 < split["p50"] <= split["p99"] and split["disk_faults_per_query"] >= 0
    assert before["mean_ms_split"] == {stage: split["mean"] for stage, split in stages.items()}

    real_fetch, delay_ms = index.fetch, 20

    def slow_fetch(found):  # a fetch that regressed by 20 ms a query
        time.sleep(delay_ms / 1000)
        return real_fetch(found)

    index.fetch = slow_fetch
    after = bench_search.measure_queries(index, queries, 10)
    assert after["stage_ms"]["doc_fetch"]["p50"] >= delay_ms
    assert after["stage_ms"]["doc_fetch"]["cpu_mean"] < delay_ms / 2  # waiting, not computing
    assert after["stage_ms"]["search"]["p50"] < delay_ms and after["stage_ms"]["snippet"]["p50"] < delay_ms
    assert after["latency_ms_p50"] >= delay_ms
