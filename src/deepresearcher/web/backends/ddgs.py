"""DuckDuckGo (and the other engines the ``ddgs`` package scrapes), no key needed.

``ddgs`` is optional and imported on first use: ``pip install ddgs``. It is synchronous, so each
search runs in a worker thread. It scrapes HTML result pages, so keep its rate low (backends.ddgs).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from deepresearcher.errors import BackendUnavailableError, BadResponseError, MissingDependencyError, RateLimitedError
from deepresearcher.web.backends._http import clean_snippet
from deepresearcher.web.types import SearchHit

if TYPE_CHECKING:
    from deepresearcher.config import BackendSettings


class DdgsBackend:
    """Web search through ``ddgs.DDGS().text``, normalized to {title, url, snippet}."""

    name = "ddgs"

    def __init__(self, timeout_s: float = 15.0, engine: str = "auto") -> None:
        try:
            from ddgs import DDGS
        except ImportError:
            raise MissingDependencyError(
                "Search backend 'ddgs' needs the ddgs package: pip install ddgs"
            ) from None
        self._client = DDGS(timeout=max(1, int(timeout_s)))
        self.engine = engine

    @classmethod
    def from_settings(cls, settings: BackendSettings) -> DdgsBackend:
        return cls(settings.timeout_s)

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        try:
            rows = await asyncio.to_thread(self._client.text, query, max_results=top_k, backend=self.engine)
        except Exception as exc:  # ddgs raises its own tree; map it by name to keep the import lazy
            kind = type(exc).__name__
            if kind == "RatelimitException":
                raise RateLimitedError(f"ddgs was rate-limited by the search engine: {exc}") from exc
            if kind in ("TimeoutException", "DDGSException"):
                # ddgs reports "no results" as a DDGSException too.
                if "no results" in str(exc).lower():
                    return []
                raise BackendUnavailableError(f"ddgs failed: {exc}") from exc
            raise
        if not isinstance(rows, list):
            raise BadResponseError(f"ddgs returned {type(rows).__name__}, expected a list of results.")
        return [_hit(row) for row in rows if isinstance(row, dict) and row.get("href")][:top_k]

    async def aclose(self) -> None:
        """Nothing to release: ddgs opens a client per search."""


def _hit(row: dict[str, Any]) -> SearchHit:
    return SearchHit(title=str(row.get("title", "")), url=str(row["href"]), snippet=clean_snippet(row.get("body")))
