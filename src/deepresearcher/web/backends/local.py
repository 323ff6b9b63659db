"""The local search engine: a tantivy (BM25) index over any corpus, answering like a web search API.

The index stores each document's url, title and clean text (and the raw HTML when the corpus has
it), so it is both the search backend and the page store that ``browse_webpage`` reads from.

Corpus input is JSONL with ``url``, ``title`` and ``text`` or ``html``, or Search-R1's
``{"id", "contents"}`` lines (wiki-18). It is streamed: memory stays
flat whatever the corpus size. Bad lines (no url, not JSON, not UTF-8) are reported by line number
and skipped, never fatal.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import tantivy

from deepresearcher.errors import DataError, IndexNotFoundError
from deepresearcher.web.html import decode_bytes, html_to_text
from deepresearcher.web.types import Page, Passage, SearchHit, split_contents

logger = logging.getLogger(__name__)

META_FILE = "deepresearcher-index.json"
MAX_INDEXED_CHARS = 200_000  # text beyond this is not indexed: bounds memory on giant pages
MAX_STORED_HTML = 5_000_000  # larger pages are cut: extraction time grows with size
_WORD = re.compile(r"\w+", re.UNICODE)


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True)
    builder.add_text_field("body", stored=True)
    builder.add_bytes_field("html", stored=True, indexed=False)
    return builder.build()


@dataclass
class CorpusProblem:
    line: int
    reason: str


@dataclass
class BuildStats:
    documents: int = 0
    skipped: int = 0
    seconds: float = 0.0
    problems: list[CorpusProblem] = field(default_factory=list)


def read_corpus(path: str | Path, stats: BuildStats | None = None) -> Iterator[dict]:
    """Stream documents from a JSONL corpus, reporting bad lines into ``stats`` instead of raising."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"Corpus file {path} does not exist.")
    stats = stats if stats is not None else BuildStats()
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError:
                try:  # a line of valid JSON in another encoding: decode leniently and retry
                    doc = orjson.loads(decode_bytes(raw).encode("utf-8", errors="replace"))
                except orjson.JSONDecodeError as exc:
                    _problem(stats, number, f"not valid JSON ({exc})")
                    continue
            if isinstance(doc, dict) and "url" not in doc and isinstance(doc.get("contents"), str):
                doc = _from_search_r1(doc)
            if not isinstance(doc, dict) or not isinstance(doc.get("url"), str) or not doc["url"].strip():
                _problem(stats, number, "no 'url' field; every corpus line needs url, title, and text or html "
                         "(or Search-R1's id and contents)")
                continue
            if not isinstance(doc.get("text"), str) and not isinstance(doc.get("html"), str):
                _problem(stats, number, "neither 'text' nor 'html' is a string")
                continue
            yield doc


def _from_search_r1(doc: dict) -> dict:
    """A Search-R1 / FlashRAG line (``{"id", "contents": "\"Title\"\ntext"}``, as in wiki-18) as url/title/text.

    The id becomes the URL, so ``/retrieve`` answers with the corpus's own ids and browse finds the passage.
    """
    title, text = split_contents(doc["contents"])
    return {"url": str(doc.get("id", "")), "title": title, "text": text}


def _problem(stats: BuildStats, line: int, reason: str) -> None:
    stats.skipped += 1
    if len(stats.problems) < 20:
        stats.problems.append(CorpusProblem(line, reason))
    logger.warning("corpus line %d skipped: %s", line, reason)


def build_index(docs: Iterable[dict], out_dir: str | Path, stats: BuildStats | None = None,
                heap_bytes: int = 128_000_000, on_progress: Callable[[int], None] | None = None) -> BuildStats:
    """Index documents (dicts with url, title, text or html) into ``out_dir``; returns counts and time."""
    stats = stats if stats is not None else BuildStats()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.iterdir():  # rebuild from scratch: tantivy would otherwise append to an old index
        if old.is_file():
            old.unlink()
    started = time.perf_counter()
    index = tantivy.Index(_schema(), path=str(out_dir))
    writer = index.writer(heap_size=heap_bytes, num_threads=1)
    for doc in docs:
        html = doc.get("html") if isinstance(doc.get("html"), str) else None
        text = doc.get("text") if isinstance(doc.get("text"), str) else None
        if text is None:
            text = html_to_text(html[:MAX_STORED_HTML]) if html else ""
        title = doc.get("title") if isinstance(doc.get("title"), str) else ""
        fields = {"url": doc["url"], "title": title, "body": text[:MAX_INDEXED_CHARS]}
        if html:
            fields["html"] = html[:MAX_STORED_HTML].encode("utf-8", errors="replace")
        writer.add_document(tantivy.Document(**fields))
        stats.documents += 1
        if on_progress and stats.documents % 1000 == 0:
            on_progress(stats.documents)
    writer.commit()
    writer.wait_merging_threads()
    stats.seconds = time.perf_counter() - started
    (out_dir / META_FILE).write_bytes(orjson.dumps({"documents": stats.documents, "skipped": stats.skipped,
                                                    "build_seconds": round(stats.seconds, 3)}))
    return stats


class LocalIndex:
    """A built index, opened once: BM25 search with query-aware snippets, and page lookup by URL."""

    def __init__(self, index_dir: str | Path, snippet_chars: int = 240) -> None:
        index_dir = Path(index_dir)
        if not (index_dir / META_FILE).is_file():
            raise IndexNotFoundError(
                f"No search index in {index_dir}; build one with `deepresearcher index build --corpus FILE "
                f"--out {index_dir}` (or omit --index to use the default world)."
            )
        self.dir = index_dir
        self._index = tantivy.Index.open(str(index_dir))
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self.snippet_chars = snippet_chars

    @property
    def num_docs(self) -> int:
        return self._searcher.num_docs

    def _top(self, query: str, top_k: int) -> tuple[tantivy.Query | None, list[tuple[float, tantivy.DocAddress]]]:
        """The parsed query and its best ``top_k`` ``(score, address)`` pairs; any text is a valid query."""
        words = _WORD.findall(query.lower())
        if not words or top_k <= 0:
            return None, []
        parsed = self._index.parse_query(" ".join(words), ["title", "body"], field_boosts={"title": 2.0})
        return parsed, self._searcher.search(parsed, top_k).hits

    def search(self, query: str, top_k: int = 10) -> list[SearchHit]:
        """BM25 over title (boosted) and body, each hit with a query-aware snippet of the body."""
        parsed, found = self._top(query, top_k)
        if not found:
            return []
        snippets = tantivy.SnippetGenerator.create(self._searcher, parsed, self._schema, "body")
        snippets.set_max_num_chars(self.snippet_chars)
        hits = []
        for _score, address in found:
            doc = self._searcher.doc(address)
            body = doc.get_first("body") or ""
            snippet = snippets.snippet_from_doc(doc).fragment() or body[: self.snippet_chars]
            hits.append(SearchHit(title=doc.get_first("title") or "", url=doc.get_first("url"),
                                  snippet=" ".join(snippet.split())))
        return hits

    def passages(self, query: str, top_k: int = 10) -> list[Passage]:
        """The same ranking as :meth:`search`, each document whole with its BM25 score (the retriever API)."""
        passages = []
        for score, address in self._top(query, top_k)[1]:
            doc = self._searcher.doc(address)
            url = doc.get_first("url")
            passages.append(Passage(id=url, url=url, title=doc.get_first("title") or "",
                                    text=doc.get_first("body") or "", score=score))
        return passages

    def get_page(self, url: str) -> Page | None:
        """The stored page for ``url`` (tolerating a trailing slash or #fragment), or None."""
        for candidate in dict.fromkeys((url, url.split("#")[0], url.rstrip("/"), url.split("#")[0].rstrip("/"))):
            query = tantivy.Query.term_query(self._schema, "url", candidate)
            result = self._searcher.search(query, 1)
            if result.hits:
                doc = self._searcher.doc(result.hits[0][1])
                html = doc.get_first("html")
                return Page(url=candidate, title=doc.get_first("title") or "",
                            html=bytes(html).decode("utf-8", errors="replace") if html else None,
                            text=None if html else doc.get_first("body") or "")
        return None


class LocalSearchBackend:
    """The ``local`` search backend: a LocalIndex behind the async SearchBackend protocol."""

    name = "local"

    def __init__(self, index: LocalIndex | str | Path, snippet_chars: int = 240) -> None:
        self.index = index if isinstance(index, LocalIndex) else LocalIndex(index, snippet_chars)

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        # tantivy answers in well under a millisecond; a thread hop would cost more than the search.
        return self.index.search(query, top_k)

    async def aclose(self) -> None:
        return None
