"""Reader quality and speed: the embedded SmolLM2 LLM reader against the extractive readers.

On evidence pages of the synthetic world's test split, each reader reads the page for the task's
question (with the hop's search query); a page counts as *recalled* when the fact it is evidence
for (the hop's value, e.g. a birth year) appears in the notes the reader returned. Reports recall,
pages/s, page tokens/s (four characters per token) and, for the LLM reader, model tokens/s.

    deepresearcher bench reader --json [--pages 32] [--readers llm,extractive,extractive-short,embedding]

The world's pages are short (~600 characters), so the default extractive reader's two 600-character
passages are nearly the whole page; the ``-short`` variants return one ~160-character passage, about
as long as the LLM reader's notes, for a comparison at equal note length.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from typing import Any

from deepresearcher.config import Config, ReaderLLMConfig, WorldConfig
from deepresearcher.web.html import html_to_text
from deepresearcher.web.local_world import ensure_world
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.world import iter_pages, load_tasks


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def evidence_requests(world: Any, split: str, limit: int, extractor: str = "trafilatura") -> list[tuple[ReadRequest, list[str]]]:
    """(request, accepted fact strings) for the first evidence page of each hop of each task, up to ``limit``."""
    wanted: dict[str, list[tuple[str, str, list[str]]]] = {}
    count = 0
    for task in load_tasks(world, split):
        for hop in task.chain:
            if count >= limit or not hop.evidence_urls:
                break
            facts = [hop.value] + (task.golds if hop is task.chain[-1] and hop.value in task.golds else [])
            wanted.setdefault(hop.evidence_urls[0], []).append((task.question, hop.query, facts))
            count += 1
    out = []
    for page in iter_pages(world):
        for question, query, facts in wanted.get(page["url"], []):
            text = html_to_text(page["html"], extractor=extractor)
            out.append((ReadRequest(question=question, url=page["url"], text=text, query=query), facts))
    return out


SHORT = {"chunk_chars": 160, "top_passages": 1}
"""The ``-short`` extractive readers return one ~160-character passage: about the LLM reader's note length."""


def make_readers(names: list[str], llm: ReaderLLMConfig) -> dict[str, Any]:
    readers: dict[str, Any] = {}
    for name in names:
        if name == "llm":
            from deepresearcher.web.reader.llm import LLMReader

            readers[name] = LLMReader.from_config(llm)
        elif name in ("extractive", "extractive-short"):
            from deepresearcher.web.reader.extractive import ExtractiveReader

            readers[name] = ExtractiveReader(**(SHORT if name.endswith("-short") else {}))
        elif name in ("embedding", "embedding-short"):
            from deepresearcher.web.reader.embedding import EmbeddingReader, load_minilm

            load_minilm()
            readers[name] = EmbeddingReader(**(SHORT if name.endswith("-short") else {}))
        elif name == "raw":
            from deepresearcher.web.reader.raw import RawReader

            readers[name] = RawReader()
        else:
            raise SystemExit(f"unknown reader {name!r}; choose from llm, extractive, extractive-short, embedding, "
                             "embedding-short, raw")
    return readers


async def measure(reader: Any, items: list[tuple[ReadRequest, list[str]]], concurrency: int) -> dict[str, Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(request: ReadRequest):
        async with gate:
            return await reader.read(request)

    started = time.perf_counter()
    results = await asyncio.gather(*(one(r) for r, _ in items))
    elapsed = time.perf_counter() - started
    recalled = sum(any(_norm(f) in _norm(" ".join(n.text for n in notes)) for f in facts)
                   for notes, (_, facts) in zip(results, items))
    page_tokens = sum(len(r.text) for r, _ in items) / 4
    note_chars = [sum(len(n.text) for n in notes) for notes in results]
    row: dict[str, Any] = {
        "pages": len(items),
        "fact_recall": round(recalled / max(1, len(items)), 3),
        "pages_per_s": round(len(items) / elapsed, 2),
        "page_tokens_per_s": round(page_tokens / elapsed, 1),
        "mean_note_chars": round(sum(note_chars) / max(1, len(note_chars)), 1),
        "seconds": round(elapsed, 2),
    }
    client = getattr(reader, "client", None)
    if client is not None:
        usage = client.usage
        row["model"] = client.model
        row["model_tokens_per_s"] = round((usage.prompt_tokens + usage.completion_tokens) / elapsed, 1)
        row["generated_tokens_per_s"] = round(usage.completion_tokens / elapsed, 1)
        row["usage"] = usage.as_dict()
        row["reader_stats"] = dict(reader.stats)
    return row


def run(pages: int = 32, readers: str = "llm,extractive,extractive-short", seed: int = 7, size: str = "small", split: str = "test",
        concurrency: int = 8, chunk_tokens: int = 512, max_chunks: int = 2, max_new_tokens: int = 48,
        extractor: str = "trafilatura") -> dict[str, Any]:
    """Read ``pages`` evidence pages with each reader; returns recall and speed per reader."""
    world = ensure_world(Config(world=WorldConfig(seed=seed, size=size)))
    items = evidence_requests(world, split, pages, extractor)
    llm_config = ReaderLLMConfig(kind="embedded", chunk_tokens=chunk_tokens, max_chunks=max_chunks,
                                 max_new_tokens=max_new_tokens, max_batch=concurrency)
    load_started = time.perf_counter()
    built = make_readers([r.strip() for r in readers.split(",") if r.strip()], llm_config)
    load_s = time.perf_counter() - load_started
    results = {name: asyncio.run(measure(reader, items, concurrency)) for name, reader in built.items()}
    mean_page_chars = sum(len(r.text) for r, _ in items) / max(1, len(items))
    return {"bench": "reader", "world": {"seed": seed, "size": size, "split": split}, "extractor": extractor,
            "load_seconds": round(load_s, 1),
            "mean_page_chars": round(mean_page_chars, 1),
            "settings": {"chunk_tokens": chunk_tokens, "max_chunks": max_chunks, "max_new_tokens": max_new_tokens,
                         "concurrency": concurrency}, "readers": results}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench reader", description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=32, help="evidence pages read by each reader")
    parser.add_argument("--readers", default="llm,extractive,extractive-short",
                        help="comma list of llm, extractive, extractive-short, embedding, embedding-short, raw")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--size", default="small", choices=["tiny", "small", "medium", "large"])
    parser.add_argument("--split", default="test", choices=["train", "dev", "test"])
    parser.add_argument("--concurrency", type=int, default=8, help="pages read at once (= LLM batch size)")
    parser.add_argument("--chunk-tokens", type=int, default=512)
    parser.add_argument("--max-chunks", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--extractor", default="trafilatura", choices=["trafilatura", "resiliparse"],
                        help="how the pages' HTML becomes text (browse.extractor)")
    args = parser.parse_args(argv)
    return run(args.pages, args.readers, args.seed, args.size, args.split, args.concurrency, args.chunk_tokens,
               args.max_chunks, args.max_new_tokens, args.extractor)


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:]), indent=2))
