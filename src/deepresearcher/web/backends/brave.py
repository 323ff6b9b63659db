"""Brave Search API: ``GET /res/v1/web/search?q=...&count=...`` with ``X-Subscription-Token``.

Answer ``{"web": {"results": [{"title", "url", "description", ...}]}, ...}``; descriptions carry
``<strong>`` highlights, which are stripped. The key comes from BRAVE_API_KEY by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepresearcher.web.backends._http import JsonHttp, clean_snippet, read_api_key, require
from deepresearcher.web.types import SearchHit

if TYPE_CHECKING:
    from deepresearcher.config import BackendSettings

DEFAULT_BASE_URL = "https://api.search.brave.com"
MAX_COUNT = 20  # the API's limit per request


class BraveBackend:
    """Brave web search, normalized to {title, url, snippet}."""

    name = "brave"

    def __init__(self, api_key: str, base_url: str = DEFAULT_BASE_URL, timeout_s: float = 15.0) -> None:
        self._http = JsonHttp(
            self.name, base_url, timeout_s, headers={"X-Subscription-Token": api_key},
            forbidden_hint="the key in the environment variable named by backends.brave.api_key_env was rejected",
        )

    @classmethod
    def from_settings(cls, settings: BackendSettings) -> BraveBackend:
        return cls(
            read_api_key(settings.api_key_env, cls.name), settings.base_url or DEFAULT_BASE_URL, settings.timeout_s
        )

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        data = await self._http.request(
            "GET", "/res/v1/web/search", params={"q": query, "count": min(top_k, MAX_COUNT)}
        )
        require(isinstance(data, dict), self.name, "a JSON object")
        web = data.get("web", {"results": []})  # absent when nothing matched
        require(isinstance(web, dict) and isinstance(web.get("results"), list), self.name, "'web.results'")
        hits = [
            SearchHit(
                title=clean_snippet(item.get("title")), url=item["url"], snippet=clean_snippet(item.get("description"))
            )
            for item in web["results"]
            if isinstance(item, dict) and isinstance(item.get("url"), str)
        ]
        return hits[:top_k]

    async def aclose(self) -> None:
        await self._http.aclose()
