"""The answer-leak filter: drops search hits that point at a benchmark's own files.

Why: with live search, a question from a public QA set can be "answered" by finding the dataset itself
(a hub's dataset viewer, a Kaggle mirror). Such hits are removed before the policy sees them.

A pattern is ``host`` or ``host/path-prefix``; the host matches itself and its subdomains, the path
matches as a prefix at a ``/`` boundary. ``huggingface.co/datasets`` blocks
``https://www.huggingface.co/datasets/hotpot_qa`` but not ``https://huggingface.co/datasets-guide``.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from deepresearcher.web.backends.base import SearchBackend
from deepresearcher.web.types import SearchHit

logger = logging.getLogger(__name__)


class LeakFilter:
    """Matches URLs against ``host[/path-prefix]`` patterns."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns: list[tuple[str, str]] = []
        for pattern in patterns:
            pattern = pattern.strip().lower()
            if "://" in pattern:
                pattern = pattern.split("://", 1)[1]
            host, _, path = pattern.partition("/")
            if host:
                self.patterns.append((host, "/" + path.strip("/") if path.strip("/") else ""))

    def blocks(self, url: str) -> bool:
        """True when ``url`` falls under one of the patterns."""
        try:
            parts = urlsplit(url.strip() if "://" in url else "//" + url.strip())
        except ValueError:
            return False
        host = (parts.hostname or "").lower()
        path = parts.path.lower().rstrip("/")
        for blocked_host, prefix in self.patterns:
            if host != blocked_host and not host.endswith("." + blocked_host):
                continue
            if not prefix or path == prefix or path.startswith(prefix + "/"):
                return True
        return False

    def filter(self, hits: list[SearchHit]) -> list[SearchHit]:
        """The hits that do not match, in their order."""
        kept = [h for h in hits if not self.blocks(h.url)]
        if len(kept) != len(hits):
            logger.info("leak filter dropped %d of %d hits", len(hits) - len(kept), len(hits))
        return kept


class FilteredBackend:
    """A backend whose hits pass through a :class:`LeakFilter`."""

    def __init__(self, backend: SearchBackend, leak_filter: LeakFilter) -> None:
        self.backend = backend
        self.name = backend.name
        self.leak_filter = leak_filter

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        return self.leak_filter.filter(await self.backend.search(query, top_k))

    async def aclose(self) -> None:
        await self.backend.aclose()
