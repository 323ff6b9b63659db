"""Local search engine benchmark: index size, build time, query latency p50/p99 and queries/s.

The corpus is generated (seeded): passages of Zipf-distributed words from a 50k-word vocabulary,
the shape of real text for an inverted index. Queries are 3-5 words drawn the same way, with one
rare word from the corpus so that every query has hits.

    deepresearcher bench search --json                 # 100k passages
    deepresearcher bench search --docs 1000000 --json  # the README's figure
"""

from __future__ import annotations

import argparse
import itertools
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

from deepresearcher.web.backends.local import LocalIndex, build_index


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def _passages(n: int, vocab: list[str], seed: int):
    rng = random.Random(seed)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))
    for i in range(n):
        words = rng.choices(vocab, cum_weights=cumulative, k=rng.randint(40, 90))
        yield {"url": f"https://corpus.example/p/{i}", "title": " ".join(words[:5]), "text": " ".join(words)}


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench search")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    vocab = _vocabulary(rng, 50_000)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        stats = build_index(_passages(args.docs, vocab, args.seed), Path(tmp) / "index")
        build_seconds = time.perf_counter() - started
        size = sum(p.stat().st_size for p in (Path(tmp) / "index").iterdir())
        index = LocalIndex(Path(tmp) / "index")
        queries = [" ".join(rng.choices(vocab[:5000], k=rng.randint(2, 4)) + [rng.choice(vocab)])
                   for _ in range(args.queries)]
        for query in queries[:50]:  # warm the OS page cache and tantivy's readers
            index.search(query, args.top_k)
        latencies = []
        started = time.perf_counter()
        for query in queries:
            t0 = time.perf_counter()
            index.search(query, args.top_k)
            latencies.append(time.perf_counter() - t0)
        wall = time.perf_counter() - started
    latencies.sort()
    return {
        "benchmark": "search",
        "documents": stats.documents,
        "index_bytes": size,
        "build_seconds": round(build_seconds, 2),
        "docs_per_second": round(stats.documents / build_seconds),
        "build_includes": "generating the passages in Python",
        "queries": len(queries),
        "top_k": args.top_k,
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 3),
        "latency_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 3),
        "queries_per_second": round(len(queries) / wall, 1),
        "includes": "BM25 top-k plus a query-aware snippet per hit, one thread",
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:]), indent=2))
