"""A self-hosted SearXNG metasearch engine (no key): ``GET {base}/search?q=...&format=json``.

Answer ``{"results": [{"title", "url", "content", ...}], ...}``. The instance must allow the JSON
format (``search.formats: [html, json]`` in its settings.yml); otherwise it answers 403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepresearcher.errors import ConfigError
from deepresearcher.web.backends._http import JsonHttp, clean_snippet, require
from deepresearcher.web.types import SearchHit

if TYPE_CHECKING:
    from deepresearcher.config import BackendSettings


class SearxngBackend:
    """Results of a SearXNG instance, normalized to {title, url, snippet}."""

    name = "searxng"

    def __init__(self, base_url: str, timeout_s: float = 15.0) -> None:
        self._http = JsonHttp(
            self.name, base_url, timeout_s,
            forbidden_hint="enable the JSON format in the instance's settings.yml (search.formats: [html, json])",
        )

    @classmethod
    def from_settings(cls, settings: BackendSettings) -> SearxngBackend:
        if not settings.base_url:
            raise ConfigError("Backend 'searxng' needs backends.searxng.base_url (e.g. http://127.0.0.1:8888).")
        return cls(settings.base_url, settings.timeout_s)

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        data = await self._http.request("GET", "/search", params={"q": query, "format": "json"})
        require(isinstance(data, dict) and isinstance(data.get("results"), list), self.name, "a 'results' list")
        hits = [
            SearchHit(title=str(item.get("title", "")), url=item["url"], snippet=clean_snippet(item.get("content")))
            for item in data["results"]
            if isinstance(item, dict) and isinstance(item.get("url"), str)
        ]
        return hits[:top_k]

    async def aclose(self) -> None:
        await self._http.aclose()
