"""The one interface rollouts use for the web, whether it runs in process or behind handler services.

``deepresearcher.web.environment.WebEnvironment`` (in process) and
``deepresearcher.web.client.RemoteEnvironment`` (HTTP to ``env.server_urls``) both satisfy it, so the
agent loop, training and evaluation never know which one they hold.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from deepresearcher.web.types import BrowseResult, QueryResult


@runtime_checkable
class Environment(Protocol):
    """Search and browse for many rollouts at once; stateless between calls."""

    async def search(self, queries: list[str], top_k: int | None = None) -> list[QueryResult]:
        """One result per query, in order, ``top_k`` hits each (None: ``search.top_k``); a failed query
        carries ``error`` instead of raising."""
        ...

    async def browse(
        self, question: str, urls: list[str], notes: list[str] | None = None, queries: list[str] | None = None
    ) -> list[BrowseResult]:
        """One result per URL, in order: the reader's new notes for ``question``, or an error observation.

        ``notes`` are what the rollout already knows and ``queries`` the searches it made; both travel
        with the call so any server can answer it.
        """
        ...

    async def aclose(self) -> None:
        """Release indexes, caches (flushing them) and connections."""
        ...
