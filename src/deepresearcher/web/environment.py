"""The in-process environment: search and browse for many rollouts, behind the ``Environment`` protocol.

It composes one search backend, one page source (the local index's page store, or the live
fetcher), HTML → text, and one reader. The handler service serves exactly this object over HTTP,
and ``web.client.RemoteEnvironment`` speaks the same protocol, so rollouts never know which they use.

What is recorded in the cache: whatever is costly or can change under us: live searches, live page
fetches and the outputs of the readers that call a model (``RECORDED_READERS``). The local index and the
cheap deterministic readers are pure functions of their inputs, so recording them would only add writes.

Failures never escape as exceptions: a failed query or page becomes ``error`` on its result, which
the agent shows the policy as an observation.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any, Protocol

from deepresearcher.config import Config
from deepresearcher.errors import ConfigError, DeepResearcherError, ReplayMissError
from deepresearcher.web.backends.base import SearchBackend
from deepresearcher.web.html import html_to_text
from deepresearcher.web.reader import RECORDED_READERS, make_reader
from deepresearcher.web.reader.base import Reader, ReadRequest
from deepresearcher.web.types import BrowseResult, Note, Page, Passage, QueryResult, SearchHit

logger = logging.getLogger(__name__)

# Errors that are the user's to fix (a replay miss, a missing API key): they stop the run instead of
# becoming observations, or a replayed run would silently drift from its recording.
_FATAL = (ReplayMissError, ConfigError)



class PageSource(Protocol):
    """Gives the page at a URL; raises a DeepResearcherError when it cannot."""

    async def get(self, url: str) -> Page: ...

    async def aclose(self) -> None: ...


class LocalPageSource:
    """Pages from a local index's store; the web of the synthetic world or of any indexed corpus."""

    def __init__(self, index: Any) -> None:
        self.index = index

    async def get(self, url: str) -> Page:
        from deepresearcher.errors import PageError

        page = self.index.get_page(url)
        if page is None:
            raise PageError(f"{url} is not in the local page store; browse URLs that a search returned.")
        return page

    async def aclose(self) -> None:
        return None


class LivePageSource:
    """Pages fetched from the live web, through the record/replay cache.

    A cached page holds the text its fetcher's extractor made, so the extractor is part of the key: a
    recording made with one extractor never replays its text under the other (replay misses instead).
    """

    def __init__(self, fetcher: Any, cache: Any = None) -> None:
        self.fetcher, self.cache = fetcher, cache

    async def get(self, url: str) -> Page:
        from deepresearcher.web.cache import cached

        return await cached(self.cache, "fetch", "http", url, {"extractor": self.fetcher.extractor},
                            lambda: self.fetcher.fetch(url), encode=Page.model_dump, decode=Page.model_validate)

    async def aclose(self) -> None:
        await self.fetcher.aclose()


class WebEnvironment:
    """Search + browse over one backend, one page source and one reader, optionally cached."""

    def __init__(self, backend: SearchBackend, pages: PageSource, reader: Reader, config: Config,
                 cache: Any = None) -> None:
        self.backend, self.pages, self.reader, self.config, self.cache = backend, pages, reader, config, cache

    @classmethod
    def from_config(cls, config: Config) -> WebEnvironment:
        """Build from config; with the default local backend and no index, the default world is built first.

        Local or live is decided here, once: a local index is opened once and serves both the search
        backend and the page store."""
        from deepresearcher.web.backends import make_backend

        local = config.search.backend == "local"
        cache = None
        if config.cache.mode != "off" and (not local or config.browse.reader in RECORDED_READERS):
            from deepresearcher.web.cache import WebCache

            cache = WebCache.from_config(config.cache, config.resolved_cache_dir())
        if local:
            from deepresearcher.web.backends.local import LocalIndex

            index_dir = config.search.index
            if index_dir is None:
                from deepresearcher.web.local_world import ensure_world

                index_dir = ensure_world(config) / "index"
            index = LocalIndex(index_dir, snippet_chars=config.search.snippet_chars)
            backend = make_backend(config.search, config.backends, index=index)
            pages: PageSource = LocalPageSource(index)
        else:
            from deepresearcher.web.fetch import PageFetcher

            backend = make_backend(config.search, config.backends)
            pages = LivePageSource(PageFetcher(config.fetch, extractor=config.browse.extractor), cache)
            if config.search.backend == "retriever":  # its hits are passages: browsing one returns it
                from deepresearcher.web.backends.retriever import RetrieverPages

                pages = RetrieverPages(config.backends.retriever, web=pages)
        return cls(backend, pages, make_reader(config), config, cache)

    def preload(self) -> int:
        """Bring the local index's postings into the OS page cache (``LocalIndex.preload``), so that a server's
        first queries do not wait on the disk; the bytes read, 0 with a live backend."""
        return self.pages.index.preload() if isinstance(self.pages, LocalPageSource) else 0

    async def search(self, queries: list[str], top_k: int | None = None) -> list[QueryResult]:
        """Run each query concurrently; one result per query, in order, errors included."""
        top_k = top_k or self.config.search.top_k
        if len(queries) == 1:  # the common case: no tasks to schedule
            return [await self._search_one(queries[0], top_k)]
        return list(await asyncio.gather(*(self._search_one(q, top_k) for q in queries)))

    async def _search_one(self, query: str, top_k: int) -> QueryResult:
        try:
            hits = await self._cached_search(query, top_k)
        except _FATAL:
            raise
        except DeepResearcherError as exc:
            logger.info("search %r failed: %s", query, exc)
            return QueryResult(query=query, error=str(exc))
        remember = getattr(self.pages, "remember", None)  # a retriever's pages are its hits' passages
        if remember is not None:
            remember(hits)
        return QueryResult(query=query, hits=hits)

    async def _cached_search(self, query: str, top_k: int) -> list[SearchHit]:
        if self.cache is None or self.backend.name == "local":
            return await self.backend.search(query, top_k)
        from deepresearcher.web.cache import cached

        return await cached(self.cache, "search", self.backend.name, query, {"top_k": top_k},
                            lambda: self.backend.search(query, top_k),
                            encode=lambda hits: [h.model_dump() for h in hits],
                            decode=lambda rows: [SearchHit(**r) for r in rows])

    async def browse(self, question: str, urls: list[str], notes: list[str] | None = None,
                     queries: list[str] | None = None) -> list[BrowseResult]:
        """Read each URL for ``question``; one result per URL, in order, errors included."""
        query = " ".join(queries or [])
        return list(await asyncio.gather(*(self._browse_one(question, u, notes or [], query) for u in urls)))

    async def _browse_one(self, question: str, url: str, notes: list[str], query: str) -> BrowseResult:
        try:
            page = await self.read_page(url)
            if not page.text:
                return BrowseResult(url=url, title=page.title, error="the page has no readable text")
            request = ReadRequest(question=question, url=url, text=page.text, query=query, notes=notes)
            found = await self._read(request)
        except _FATAL:
            raise
        except DeepResearcherError as exc:
            logger.info("browse %s failed: %s", url, exc)
            return BrowseResult(url=url, error=str(exc))
        return BrowseResult(url=url, title=page.title, notes=found)

    async def read_page(self, url: str) -> Page:
        """The page at ``url`` as clean text (``text`` set, ``html`` dropped); raises a DeepResearcherError."""
        page = await self.pages.get(url)
        text = page.text if page.text is not None else html_to_text(
            (page.html or "")[: self.config.browse.max_page_bytes], extractor=self.config.browse.extractor)
        return Page(url=page.url, title=page.title, text=text.strip(), content_type=page.content_type)

    async def retrieve(self, queries: list[str], top_k: int) -> list[list[Passage]]:
        """Search-R1's retrieval: per query, whole documents with scores; a failed query has none.

        From a local index: each document's full text and BM25 score. From a live backend (through
        its resilience and the cache): each hit's snippet as the text, scored by reciprocal rank,
        since web search APIs give no scores.
        """
        if isinstance(self.pages, LocalPageSource):
            index = self.pages.index
            return [index.passages(q, top_k) for q in queries]
        results = await self.search(queries, top_k)
        return [[Passage(id=h.url, url=h.url, title=h.title, text=h.snippet, score=1.0 / rank)
                 for rank, h in enumerate(r.hits, start=1)] for r in results]

    async def _read(self, request: ReadRequest) -> list[Note]:
        if self.cache is None or self.reader.name not in RECORDED_READERS:
            return await self.reader.read(request)
        from deepresearcher.web.cache import cached

        # Keyed on a digest of the page text: the text itself can be megabytes.
        key = {**request.model_dump(exclude={"text"}), "text_sha256": hashlib.sha256(request.text.encode()).hexdigest()}
        return await cached(self.cache, "reader", self.reader.name, key,
                            getattr(self.reader, "params", {}), lambda: self.reader.read(request),
                            encode=lambda ns: [n.model_dump() for n in ns],
                            decode=lambda rows: [Note(**r) for r in rows])

    async def aclose(self) -> None:
        await self.backend.aclose()
        await self.pages.aclose()
        if hasattr(self.reader, "aclose"):  # the readers that hold a model client
            await self.reader.aclose()
        if self.cache is not None:
            await self.cache.aclose()

    async def __aenter__(self) -> WebEnvironment:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
