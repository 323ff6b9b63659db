"""The protocol every search backend implements: one async ``search`` and ``aclose``.

A backend is one file under ``web/backends/``. It maps its client's failures to the errors in
``deepresearcher.errors`` (RateLimitedError, BackendUnavailableError, BadResponseError).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from deepresearcher.web.types import SearchHit


@runtime_checkable
class SearchBackend(Protocol):
    """Answers one query with up to ``top_k`` normalized hits."""

    name: str

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        """Return at most ``top_k`` hits for ``query``; raise a BackendError subclass on failure."""
        ...

    async def aclose(self) -> None:
        """Release sessions, files and threads."""
        ...
