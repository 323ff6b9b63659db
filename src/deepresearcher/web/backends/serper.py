"""Google results through the Serper API (https://serper.dev): ``POST /search`` with ``X-API-KEY``.

Request ``{"q": query, "num": top_k}``; answer ``{"organic": [{"title", "link", "snippet", ...}], ...}``.
The key comes from the environment variable named by ``backends.serper.api_key_env`` (SERPER_API_KEY).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepresearcher.web.backends._http import JsonHttp, clean_snippet, read_api_key, require
from deepresearcher.web.types import SearchHit

if TYPE_CHECKING:
    from deepresearcher.config import BackendSettings

DEFAULT_BASE_URL = "https://google.serper.dev"


class SerperBackend:
    """Serper's Google web search, normalized to {title, url, snippet}."""

    name = "serper"

    def __init__(self, api_key: str, base_url: str = DEFAULT_BASE_URL, timeout_s: float = 15.0) -> None:
        self._http = JsonHttp(
            self.name, base_url, timeout_s, headers={"X-API-KEY": api_key},
            forbidden_hint="the key in the environment variable named by backends.serper.api_key_env was rejected",
        )

    @classmethod
    def from_settings(cls, settings: BackendSettings) -> SerperBackend:
        return cls(
            read_api_key(settings.api_key_env, cls.name), settings.base_url or DEFAULT_BASE_URL, settings.timeout_s
        )

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        data = await self._http.request("POST", "/search", json={"q": query, "num": top_k})
        require(isinstance(data, dict), self.name, "a JSON object")
        organic = data.get("organic", [])
        require(isinstance(organic, list), self.name, "an 'organic' list")
        hits = [
            SearchHit(title=str(item.get("title", "")), url=item["link"], snippet=clean_snippet(item.get("snippet")))
            for item in organic
            if isinstance(item, dict) and isinstance(item.get("link"), str)
        ]
        return hits[:top_k]

    async def aclose(self) -> None:
        await self._http.aclose()
