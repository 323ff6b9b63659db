"""Local search engine benchmark at wiki scale: build time and memory, index size, query latency split.

The corpus is generated (seeded) in Search-R1's wiki-18 line format (``{"id", "contents":
"\\"Title\\"\\ntext"}``), 100-word passages of Zipf-distributed words from a 500k-word vocabulary (the
shape of real text for an inverted index), and written to disk *before* anything is timed, so the
build measured is exactly ``deepresearcher index build`` on a wiki-18 file. Several sizes share one
corpus file: the smaller indexes read its first lines. Queries are 2-4 frequent words plus one word
from anywhere in the vocabulary.

Per size: build seconds and docs/s, peak memory while building and while serving (sampled from
/proc by this process: anonymous memory, i.e. the heap, and resident total, which also counts the
index's memory-mapped file pages the OS can drop), index bytes against corpus bytes, and, after the
index is preloaded as ``deepresearcher serve`` does at start (``LocalIndex.preload``, timed), per-query
latency p50/p99 end to end (``LocalIndex.search``: BM25 top-k plus a snippet per hit, one thread)
and of each of its steps on the same queries (``stage_ms``: search, document fetch and snippet, each with
its mean, p50, p99, CPU mean and the page faults that read the disk; ``mean_ms_split`` keeps the means
under the key earlier runs used), and how the search found its top-k
(``LocalIndex.top``'s driven evaluation against the whole query: the share of queries each way answered,
the top-k overlap with the whole query, and the whole query's mean time). On a shared machine wall-clock latency
includes waiting for a core, so the query thread's CPU time is reported beside it (``cpu_ms_*``), and
the load average at the start and end of each size.

This machine's speed moves by a third from hour to hour, so the run also builds the corpus's first
``CALIBRATION_DOCS`` passages at its start and at its end (``calibration_docs_per_s``): two runs' build
times compare only beside their calibrations.

    deepresearcher bench search --json                                    # 100k passages
    deepresearcher bench search --docs 1000000,5000000,21000000 --json --work-dir /big/disk --results r.jsonl

Each size's row is also appended to ``--results`` (JSON lines) as soon as it is measured, so a run
stopped early keeps what it measured. The work dir's corpus and indexes are deleted at the end
unless ``--keep``; ``--keep --reuse`` then measures the queries again on the kept indexes without
rebuilding them.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import resource
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import orjson

from deepresearcher.data.registry import local_data_dir
from deepresearcher.web.backends.local import META_FILE, LocalIndex
from deepresearcher.web.backends.local_build import BuildStats, build_index, read_corpus

WORDS_PER_PASSAGE = 100  # wiki-18 passages are DPR's 100-word splits
VOCABULARY = 500_000
SENTENCE_POOL = 2**21
ZIPF_S = 1.07
CALIBRATION_DOCS = 100_000  # ~4 s on 2 cores: a fixed build whose docs/s tells a slow hour from slow code


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """``size`` distinct random words of 2-11 letters, shortest first (short words are the frequent ones)."""
    lengths = rng.integers(2, 12, size=size * 2).tolist()
    raw = rng.integers(97, 123, size=(size * 2, 11), dtype=np.uint8).tobytes()
    words = list(dict.fromkeys(raw[i * 11 : i * 11 + n].decode() for i, n in enumerate(lengths)))[:size]
    return sorted(words, key=len)


def _zipf_table(size: int) -> np.ndarray:
    """Word ranks repeated in proportion to Zipf(ZIPF_S) over 2^24 slots: a uniform pick is a Zipf draw."""
    p = 1.0 / np.arange(1, size + 1) ** ZIPF_S
    counts = np.maximum(1, np.round(p / p.sum() * 2**24)).astype(np.int64)
    return np.repeat(np.arange(size, dtype=np.int32), counts)


def _sentences(rng: np.random.Generator, vocab: list[str], table: np.ndarray, count: int, words: int) -> list[str]:
    draws = table[rng.integers(0, len(table), size=(count, words))].tolist()
    return [" ".join([vocab[i] for i in row]) for row in draws]


def write_corpus(path: Path, docs: int, vocab: list[str], seed: int) -> float:
    """Write ``docs`` wiki-18 lines to ``path``; returns the seconds it took (never part of a timing).

    A passage is 10 ten-word Zipf sentences drawn from a pool of up to 2M, so that 21M passages are written
    in minutes rather than an hour; the words are still Zipf-distributed and passages still distinct. The
    lines go to a ``.partial`` file renamed at the end, so a stopped run never leaves a corpus that a later
    run in the same work dir would take as complete.
    """
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    table = _zipf_table(len(vocab))
    pool_size = min(SENTENCE_POOL, max(1000, docs))  # a small corpus needs no 2M-sentence pool
    pool = _sentences(rng, vocab, table, pool_size, WORDS_PER_PASSAGE // 10)
    titles = [t.title() for t in _sentences(rng, vocab, table, pool_size // 2, 2)]
    chunk = 50_000
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="ascii") as out:
        for start in range(0, docs, chunk):
            n = min(chunk, docs - start)
            picks = rng.integers(0, pool_size, size=(n, 10)).tolist()
            heads = rng.integers(0, len(titles), size=n).tolist()
            out.write("".join(
                f'{{"id":"{start + i}","contents":"\\"{titles[heads[i]]}\\"\\n{" ".join([pool[j] for j in row])}"}}\n'
                for i, row in enumerate(picks)
            ))
    partial.replace(path)
    return time.perf_counter() - started


def _prefix_bytes(path: Path, lines: int) -> int:
    """Size of the first ``lines`` lines of ``path``: the corpus a smaller index was built from."""
    size = 0
    with path.open("rb") as f:
        for line in itertools.islice(f, lines):
            size += len(line)
    return size


class MemorySampler:
    """Peak anonymous and resident memory of this process, sampled from /proc every 20 ms."""

    def __init__(self) -> None:
        self.peak_anon = self.peak_rss = 0
        self._stop = threading.Event()

    @staticmethod
    def now() -> tuple[int, int]:
        fields = {}
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("RssAnon", "VmRSS"):
                fields[name] = int(value.split()[0]) * 1024
        return fields.get("RssAnon", 0), fields.get("VmRSS", 0)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            anon, rss = self.now()
            self.peak_anon, self.peak_rss = max(self.peak_anon, anon), max(self.peak_rss, rss)

    @contextmanager
    def running(self) -> Iterator[MemorySampler]:
        self.peak_anon, self.peak_rss = self.now()
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            self._stop.clear()


def _mb(n: int) -> int:
    return round(n / 2**20)


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def _preload(index: LocalIndex) -> dict:
    """Bring the index into the page cache as ``deepresearcher serve`` does at start (``LocalIndex.preload``), timed."""
    started = time.perf_counter()
    loaded = index.preload()
    return {"preloaded_mb": _mb(loaded), "preload_seconds": round(time.perf_counter() - started, 1)}


STAGES = ("search", "doc_fetch", "snippet")  # LocalIndex.search's three steps: top, fetch, hits
_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)  # the query thread's own, where Linux tells


def _disk_faults() -> int:
    """Page faults that had to read the disk (a page not in the OS page cache) so far, by the query thread."""
    return resource.getrusage(_RUSAGE_THREAD).ru_majflt


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def measure_queries(index: LocalIndex, queries: list[str], top_k: int) -> dict:
    """End-to-end latency of ``index.search``, timed step by step; then ``top`` against the whole query
    (``top_whole``, every posting scored): their top-k overlap and the whole query's time.

    ``stage_ms`` holds each step's wall mean, p50 and p99, its CPU mean and its page faults that read the disk
    per query, so that a slower run names the step that slowed and how: ranking (``search``), reading the
    hits' stored documents (``doc_fetch``: faults there mean the document store left the page cache) or the
    snippets, in CPU or waiting (wall above CPU: the disk, or another process on the core).
    """
    for query in queries[:50]:  # warm the OS page cache and tantivy's readers
        index.search(query, top_k)
    index.top_paths.clear()
    latencies, cpu = [], []
    wall_by_stage: dict[str, list[float]] = {stage: [] for stage in STAGES}
    cpu_by_stage = dict.fromkeys(STAGES, 0.0)
    faults = dict.fromkeys(STAGES, 0)
    started = time.perf_counter()
    for query in queries:  # LocalIndex.search is exactly these three calls
        marks = [(time.perf_counter(), time.thread_time(), _disk_faults())]
        parsed, found = index.top(query, top_k)
        marks.append((time.perf_counter(), time.thread_time(), _disk_faults()))
        docs = index.fetch(found)
        marks.append((time.perf_counter(), time.thread_time(), _disk_faults()))
        index.hits(parsed, docs)
        marks.append((time.perf_counter(), time.thread_time(), _disk_faults()))
        latencies.append(marks[-1][0] - marks[0][0])
        cpu.append(marks[-1][1] - marks[0][1])
        for stage, (before, after) in zip(STAGES, itertools.pairwise(marks), strict=True):
            wall_by_stage[stage].append(after[0] - before[0])
            cpu_by_stage[stage] += after[1] - before[1]
            faults[stage] += after[2] - before[2]
    wall = time.perf_counter() - started
    paths = dict(index.top_paths)
    overlap, same, whole_seconds = [], 0, 0.0
    for query in queries:  # the whole query first, so that its time is not helped by top's reads
        t0 = time.perf_counter()
        reference = index.top_whole(query, top_k)[1]
        whole_seconds += time.perf_counter() - t0
        found = index.top(query, top_k)[1]
        hits = [(score, address.segment_ord, address.doc) for score, address in found]
        expected = [(score, address.segment_ord, address.doc) for score, address in reference]
        overlap.append(len({h[1:] for h in hits} & {h[1:] for h in expected}) / max(1, len(expected)))
        same += hits == expected
    latencies.sort()
    cpu.sort()
    stage_ms = {}
    for stage, times in wall_by_stage.items():
        mean = statistics.mean(times)
        times.sort()
        stage_ms[stage] = {"mean": _ms(mean), "p50": _ms(statistics.median(times)), "p99": _ms(_percentile(times, 0.99)),
                           "cpu_mean": _ms(cpu_by_stage[stage] / len(queries)),
                           "disk_faults_per_query": round(faults[stage] / len(queries), 3)}
    return {
        "queries": len(queries),
        "latency_ms_p50": _ms(statistics.median(latencies)),
        "latency_ms_p99": _ms(_percentile(latencies, 0.99)),
        "cpu_ms_p50": _ms(statistics.median(cpu)),
        "cpu_ms_p99": _ms(_percentile(cpu, 0.99)),
        "queries_per_second": round(len(queries) / wall, 1),
        "stage_ms": stage_ms,
        "mean_ms_split": {stage: stage_ms[stage]["mean"] for stage in STAGES},
        # how LocalIndex.top answered: candidates proven enough, a second pass needed, or the whole query
        "top_paths_share": {k: round(v / len(queries), 3) for k, v in sorted(paths.items())},
        "top10_overlap_with_full_query": round(statistics.mean(overlap), 4),
        "same_hits_and_scores_as_full_query": round(same / len(queries), 4),
        "full_query_search_ms_mean": _ms(whole_seconds / len(queries)),
    }


def measure_size(corpus: Path, docs: int, index_dir: Path, queries: list[str], top_k: int,
                 progress: Path | None = None, reuse: bool = False) -> dict:
    if reuse and (index_dir / META_FILE).is_file():
        return measure_serving(index_dir, queries, top_k)
    load_start = os.getloadavg()[0]
    stats = BuildStats()
    sampler = MemorySampler()
    with sampler.running():
        started = time.perf_counter()

        def report(done: int) -> None:  # a long build leaves a trace even if it is stopped
            if progress is not None and done % 1_000_000 == 0:
                with progress.open("ab") as f:
                    f.write(orjson.dumps({"target": docs, "documents": done, "seconds": round(time.perf_counter() - started, 1),
                                          "peak_anon_mb": _mb(sampler.peak_anon), "load": os.getloadavg()[0]}) + b"\n")

        build_index(itertools.islice(read_corpus(corpus, stats), docs), index_dir, stats, on_progress=report)
        build_seconds = time.perf_counter() - started
    build_anon, build_rss = sampler.peak_anon, sampler.peak_rss
    index_bytes = sum(p.stat().st_size for p in index_dir.iterdir())
    corpus_bytes = _prefix_bytes(corpus, docs)
    with sampler.running():
        index = LocalIndex(index_dir)
        preload = _preload(index)
        latency = measure_queries(index, queries, top_k)
        segments = index.num_segments
        del index
    return {
        "load_average_start_end": [round(load_start, 1), round(os.getloadavg()[0], 1)],
        "documents": stats.documents,
        "build_seconds": round(build_seconds, 1),
        "docs_per_second": round(stats.documents / build_seconds),
        "build_peak_anon_mb": _mb(build_anon),
        "build_peak_rss_mb": _mb(build_rss),
        "corpus_bytes": corpus_bytes,
        "index_bytes": index_bytes,
        "index_to_corpus": round(index_bytes / corpus_bytes, 3),
        "segments": segments,
        "top_k": top_k,
        **preload,
        **latency,
        "serve_peak_anon_mb": _mb(sampler.peak_anon),
        "serve_peak_rss_mb": _mb(sampler.peak_rss),
    }


def calibration_docs_per_s(corpus: Path, work: Path) -> float:
    """Documents per second of ``build_index`` on the corpus's first ``CALIBRATION_DOCS`` lines, index discarded."""
    out = work / "calibration-index"
    stats = BuildStats()
    build_index(itertools.islice(read_corpus(corpus, stats), CALIBRATION_DOCS), out, stats)
    shutil.rmtree(out)
    return round(stats.documents / stats.seconds, 1)


def measure_serving(index_dir: Path, queries: list[str], top_k: int) -> dict:
    """The query half of ``measure_size`` on an index kept by an earlier ``--keep`` run (``--reuse``)."""
    load_start = os.getloadavg()[0]
    sampler = MemorySampler()
    with sampler.running():
        index = LocalIndex(index_dir)
        preload = _preload(index)
        latency = measure_queries(index, queries, top_k)
        documents, segments = index.num_docs, index.num_segments
        del index
    return {"load_average_start_end": [round(load_start, 1), round(os.getloadavg()[0], 1)], "documents": documents,
            "reused_index": True, "segments": segments, "top_k": top_k, **preload, **latency,
            "serve_peak_anon_mb": _mb(sampler.peak_anon), "serve_peak_rss_mb": _mb(sampler.peak_rss)}


def real_text_ratio(summaries: Path, work: Path) -> dict:
    """Index size against corpus size on real English: Wikipedia summaries cut into 100-word passages.

    The generated corpus's random-letter words barely compress, so its doc store is near the text's
    size; real text compresses, and this row shows by how much (``wikipedia_vital_l4_en``, CC BY-SA).
    """
    articles = orjson.loads(summaries.read_bytes())
    corpus = work / "wikipedia-passages.jsonl"
    with corpus.open("wb") as out:
        n = 0
        for article in articles.values():
            words = str(article.get("extract", "")).split()
            for start in range(0, len(words), WORDS_PER_PASSAGE):
                text = " ".join(words[start : start + WORDS_PER_PASSAGE])
                out.write(orjson.dumps({"id": str(n), "contents": f'"{article.get("title", "")}"\n{text}'}) + b"\n")
                n += 1
    stats = build_index(read_corpus(corpus), work / "index-wikipedia")
    index_bytes = sum(p.stat().st_size for p in (work / "index-wikipedia").iterdir())
    shutil.rmtree(work / "index-wikipedia")
    return {"passages": stats.documents, "corpus_bytes": corpus.stat().st_size, "index_bytes": index_bytes,
            "index_to_corpus": round(index_bytes / corpus.stat().st_size, 3)}


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench search")
    parser.add_argument("--docs", default="100000", help="Corpus sizes, comma-separated (e.g. 1000000,5000000).")
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", type=Path, default=None, help="Where the corpus and indexes go (default: a temp dir).")
    parser.add_argument("--results", type=Path, default=None, help="Append each size's row here as JSON lines.")
    parser.add_argument("--keep", action="store_true", help="Keep the generated corpus and indexes.")
    parser.add_argument("--progress", type=Path, default=None, help="Append build progress here every 1M documents.")
    parser.add_argument("--reuse", action="store_true",
                        help="Measure queries on the indexes a --keep run left in --work-dir instead of building them.")
    parser.add_argument("--real-text", type=Path, default=None,
                        help="Wikipedia summaries JSON for the real-text size row (default: "
                        "wikipedia_vital_l4_en/summaries_en-us.json in the local data dir, see `data.local_data_dir`).")
    args = parser.parse_args(argv)
    if args.real_text is None:
        data = local_data_dir()
        args.real_text = (data / "wikipedia_vital_l4_en" / "summaries_en-us.json") if data else Path("not-found")
    sizes = sorted(int(s.replace("_", "")) for s in args.docs.split(","))

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench-search-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    vocab = _vocabulary(np.random.default_rng(args.seed), VOCABULARY)
    corpus = work / f"zipf-{sizes[-1]}-seed{args.seed}.jsonl"
    generation = write_corpus(corpus, sizes[-1], vocab, args.seed) if not corpus.is_file() else 0.0
    queries = [" ".join(rng.choices(vocab[:5000], k=rng.randint(2, 4)) + [rng.choice(vocab[:200_000])])
               for _ in range(args.queries)]
    rows = []
    calibration = {"start": calibration_docs_per_s(corpus, work)}
    real = real_text_ratio(args.real_text, work) if args.real_text.is_file() else "not measured: no --real-text file"
    try:
        for docs in sizes:
            row = {"benchmark": "search",
                   **measure_size(corpus, docs, work / f"index-{docs}", queries, args.top_k, args.progress, args.reuse)}
            rows.append(row)
            if args.results:
                with args.results.open("ab") as f:
                    f.write(orjson.dumps(row) + b"\n")
            if not args.keep:
                shutil.rmtree(work / f"index-{docs}")
        calibration["end"] = calibration_docs_per_s(corpus, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "search",
        "corpus": f"{WORDS_PER_PASSAGE}-word passages (10 sentences from a pool of up to {SENTENCE_POOL:,}), Zipf(s={ZIPF_S}) "
                  f"over {VOCABULARY:,} words, wiki-18 line format",
        "generation_seconds_not_timed": round(generation, 1),
        "includes": "build = `index build` on the corpus file; latency = BM25 top-k plus a snippet per hit, one thread",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "calibration_docs_per_s": calibration,
        "calibration_docs": CALIBRATION_DOCS,
        "sizes": rows,
        "real_text_index_size": real,
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:]), indent=2))
