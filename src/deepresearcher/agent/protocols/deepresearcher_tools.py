"""The original DeepResearcher handler's tool semantics over any ``Environment``.

What the checkpoint was trained to expect from its tools (``scrl/handler/handler.py``, Apache-2.0):

- ``web_search`` runs the first three queries and answers
  ``[{"search_query", "web_page_info_list": [{"quick_summary", "title", "url"}, ...]}, ...]``; it becomes the
  rollout's *last search*.
- ``browse_webpage`` reads only pages of the last search: every hit of it whose URL is in ``url_list``, in
  result order (a URL found by two queries is read twice; ``browse.max_urls`` does not apply), answering ``[{"information": [{"page_number",
  "page_summary"}, ...], "url"}, ...]`` with page numbers from 0. A page's parts already returned for the
  same hit are not returned again (``information: []``); a new search starts fresh.
- Each hit is read for the query that found it (the original reader's ``sub_question``), with what earlier
  reads gathered from that query's hits as its notes (one note per hit, its summaries each followed by a
  blank line: the original reader's context so far).
- Any failure (no search yet, a broken environment, bad arguments) answers ``[]``.

Observations are rendered by ``deepresearcher.agent.protocols.deepresearcher.render_observation``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from deepresearcher.agent.protocols.deepresearcher import MAX_QUERIES, render_observation
from deepresearcher.agent.tools import ToolOutcome
from deepresearcher.config import Config
from deepresearcher.web.interface import Environment
from deepresearcher.web.types import BrowseResult

logger = logging.getLogger(__name__)


@dataclass
class SearchContext:
    """One rollout's handler state: its question and its last search."""

    question: str
    queries: list[str] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)
    """URLs of the last search's hits, query after query, in result order (repeats kept)."""
    hit_queries: list[int] = field(default_factory=list)
    """For each hit, the index in ``queries`` of the query that found it."""
    gathered: dict[int, list[str]] = field(default_factory=dict)
    """Hit index -> every summary read from it since the last search, in order."""
    used: set[tuple[int, int]] = field(default_factory=set)
    """(hit index, page number) pairs already returned since the last search."""
    searched: bool = False


class DeepResearcherToolBox:
    """Executes calls as the original handler did; every outcome is an observation, ``[]`` on failure."""

    def __init__(self, env: Environment, config: Config) -> None:
        self.env, self.config = env, config

    async def call(self, name: str, arguments: Any, context: SearchContext) -> ToolOutcome:
        started = time.perf_counter()
        try:
            if name == "web_search":
                content = await self._search(arguments["query"], context)
            elif name == "browse_webpage":
                content = await self._browse(arguments["url_list"], context)
            else:
                raise ValueError(f"unknown tool {name!r}")
            outcome = ToolOutcome(text=render_observation(content), raw=content)
        except Exception as exc:  # noqa: BLE001 - the handler answered every failure with an empty list
            logger.info("%s failed: %r", name, exc)
            outcome = ToolOutcome(text=render_observation([]), error=f"{type(exc).__name__}: {exc}", raw=[])
        outcome.seconds = time.perf_counter() - started
        return outcome

    async def _search(self, queries: list[Any], context: SearchContext) -> list[dict[str, Any]]:
        queries = queries[:MAX_QUERIES]
        if not all(isinstance(q, str) for q in queries):
            raise TypeError("queries must be strings")
        results = await self.env.search(queries, self.config.search.top_k) if queries else []
        content = [
            {"search_query": query, "web_page_info_list": [
                {"title": hit.title, "url": hit.url, "quick_summary": hit.snippet} for hit in result.hits]}
            for query, result in zip(queries, results, strict=True)
        ]
        context.queries = list(queries)
        context.hits = [page["url"] for entry in content for page in entry["web_page_info_list"]]
        context.hit_queries = [q for q, entry in enumerate(content) for _ in entry["web_page_info_list"]]
        context.used, context.gathered = set(), {}
        context.searched = True
        return content

    async def _browse(self, url_list: list[Any], context: SearchContext) -> list[dict[str, Any]]:
        if not context.searched:
            raise LookupError("browse_webpage before any web_search")
        wanted = set(u for u in url_list if isinstance(u, str))
        chosen = [(i, url) for i, url in enumerate(context.hits) if url in wanted]
        by_query: dict[int, list[tuple[int, str]]] = {}
        for hit, url in chosen:  # each hit is read on its own, as the original's reading agent did
            by_query.setdefault(context.hit_queries[hit], []).append((hit, url))
        read = await asyncio.gather(*(self._read(query, hits, context) for query, hits in by_query.items()))
        results = dict(pair for pairs in read for pair in pairs)
        content = []
        for hit, url in chosen:
            result = results[hit]
            context.gathered.setdefault(hit, []).extend(note.text for note in result.notes)
            information = []
            for number, summary in _pages(result):
                if (hit, number) not in context.used:
                    context.used.add((hit, number))
                    information.append({"page_number": number, "page_summary": summary})
            content.append({"url": url, "information": information})
        return content

    async def _read(
        self, query: int, hits: list[tuple[int, str]], context: SearchContext
    ) -> list[tuple[int, BrowseResult]]:
        """Read one query's chosen hits for that query, with what earlier reads gathered from its hits."""
        notes = ["".join(f"{summary}\n\n" for summary in context.gathered[hit])
                 for hit, q in enumerate(context.hit_queries) if q == query and context.gathered.get(hit)]
        results = await self.env.browse(context.question, [url for _, url in hits], notes=notes,
                                        queries=[context.queries[query]])
        return [(hit, result) for (hit, _), result in zip(hits, results, strict=True)]


def _pages(result: BrowseResult) -> list[tuple[int, str]]:
    """A page's notes as (page number, summary), one per chunk in page order; nothing for a failed page."""
    if result.error:
        return []
    by_chunk: dict[int, list[str]] = {}
    for note in result.notes:
        by_chunk.setdefault(note.chunk, []).append(note.text)
    return [(chunk, "\n".join(texts)) for chunk, texts in sorted(by_chunk.items())]
