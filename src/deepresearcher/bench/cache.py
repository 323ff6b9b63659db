"""Benchmark of the record/replay cache: cached lookups/s and recorded writes/s on one SQLite file.

Why: every search, fetch and reader call of a rollout goes through the cache, and the handler service
targets thousands of cached searches per second; the cache's own cost must stay far below that.

Run: ``python bench/cache.py --records 2000 --concurrency 64`` (prints one JSON object).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from deepresearcher.web.cache import WebCache


async def _measure(path: Path, records: int, concurrency: int) -> dict[str, Any]:
    response = [{"title": f"Title {i}", "url": f"https://example.org/{i}", "snippet": "x" * 200} for i in range(10)]
    async with WebCache(path) as cache:
        sem = asyncio.Semaphore(concurrency)

        async def put(i: int) -> None:
            async with sem:
                await cache.put("search", "serper", f"query number {i}", {"top_k": 10}, response)

        start = time.perf_counter()
        await asyncio.gather(*(put(i) for i in range(records)))
        write_s = time.perf_counter() - start

        latencies: list[float] = []

        async def hit(i: int) -> None:
            async with sem:
                t0 = time.perf_counter()
                await cache.cached("search", "serper", f"Query  number {i}", {"top_k": 10}, _never)
                latencies.append(time.perf_counter() - t0)

        start = time.perf_counter()
        await asyncio.gather(*(hit(i) for i in range(records)))
        read_s = time.perf_counter() - start
        latencies.sort()
        return {
            "records": records,
            "concurrency": concurrency,
            "writes_per_s": round(records / write_s, 1),
            "cached_lookups_per_s": round(records / read_s, 1),
            "lookup_p50_us": round(statistics.median(latencies) * 1e6, 1),
            "lookup_p99_us": round(latencies[int(0.99 * (len(latencies) - 1))] * 1e6, 1),
            "file_bytes": cache.stats().size_bytes,
        }


async def _never() -> Any:
    raise AssertionError("every lookup of the benchmark must hit")


def run(records: int = 2000, concurrency: int = 64) -> dict[str, Any]:
    """Record ``records`` search answers, then serve each once from the cache; returns the rates."""
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_measure(Path(tmp) / "bench.sqlite", records, concurrency))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    return run(args.records, args.concurrency)


if __name__ == "__main__":
    print(json.dumps(main()))
