"""Any Search-R1-style retrieval server (their E5 or BM25 index, FlashRAG, ``deepresearcher serve``): ``POST {base}/retrieve``.

Request ``{"queries": [query], "topk": top_k, "return_scores": true}``; answer
``{"result": [[{"document": {"id", "contents", ...}, "score"}, ...]]}`` where ``contents`` is
``"Title"\\ntext``. A hit's title is the first line without its quotes, its snippet the passage text
(passages are short: the passage *is* what the policy reads, as in Search-R1), and its URL the
document's ``url`` when the server gives one, else its ``id``, else ``retriever:<digest of contents>``.

A hit is browsable: ``RetrieverPages`` answers ``browse_webpage`` for the URLs searches returned with
their passages, asks the server's ``POST /access`` (``deepresearcher serve``, ASearcher) for an id it has
not seen in this process, and fetches other http(s) URLs from the web.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from deepresearcher.errors import BackendError, ConfigError, PageError
from deepresearcher.web.backends._http import JsonHttp, require
from deepresearcher.web.types import Page, SearchHit, split_contents

if TYPE_CHECKING:
    from deepresearcher.config import BackendSettings

REMEMBERED_PASSAGES = 100_000
"""Passages of recent hits ``RetrieverPages`` keeps for browsing (a few hundred bytes each)."""


class RetrieverBackend:
    """Passages of a Search-R1-style retrieval server, normalized to {title, url, snippet}."""

    name = "retriever"

    def __init__(self, base_url: str, timeout_s: float = 15.0) -> None:
        self._http = JsonHttp(self.name, base_url, timeout_s,
                              forbidden_hint="the retrieval server refused the request; check its access settings")

    @classmethod
    def from_settings(cls, settings: BackendSettings) -> RetrieverBackend:
        if not settings.base_url:
            raise ConfigError("Backend 'retriever' needs backends.retriever.base_url (the retrieval server, e.g. "
                              "http://127.0.0.1:8000; /retrieve is appended).")
        return cls(settings.base_url.removesuffix("/retrieve"), settings.timeout_s)

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        data = await self._http.request("POST", "/retrieve",
                                        json={"queries": [query], "topk": top_k, "return_scores": True})
        require(isinstance(data, dict) and isinstance(data.get("result"), list) and len(data["result"]) == 1,
                self.name, "a 'result' list with one entry per query")
        documents = data["result"][0]
        require(isinstance(documents, list), self.name, "a list of documents for the query")
        return [hit for hit in map(_hit, documents) if hit is not None][:top_k]

    async def aclose(self) -> None:
        await self._http.aclose()


def _hit(item: Any) -> SearchHit | None:
    """A hit from ``{"document": {...}, "score"}`` or a bare document; None when it has no contents."""
    document = item.get("document", item) if isinstance(item, dict) else None
    if not isinstance(document, dict) or not isinstance(document.get("contents"), str):
        return None
    title, text = split_contents(document["contents"])
    where = document.get("url") or document.get("id")
    if where is None or not str(where).strip():  # a server without ids: a stable name for the passage
        where = "retriever:" + hashlib.sha256(document["contents"].encode()).hexdigest()[:16]
    return SearchHit(title=title, url=str(where), snippet=" ".join(text.split()))


class RetrieverPages:
    """The page source beside a retriever backend: a hit's URL opens its passage (``PageSource``).

    Passages of the hits searches returned (``remember``) are served from memory; an id not seen in this
    process is asked of the server's ``POST /access``; any other http(s) URL goes to ``web`` (the live
    fetcher), since a policy may also browse a URL it read in a passage.
    """

    def __init__(self, settings: BackendSettings, web: Any) -> None:
        self._http = JsonHttp("retriever", (settings.base_url or "").removesuffix("/retrieve"), settings.timeout_s)
        self._web = web
        self._passages: OrderedDict[str, Page] = OrderedDict()

    def remember(self, hits: list[SearchHit]) -> None:
        """Keep the passages of ``hits`` for browsing (the most recent ``REMEMBERED_PASSAGES``)."""
        for hit in hits:
            self._passages[hit.url] = Page(url=hit.url, title=hit.title, text=hit.snippet, content_type="text/plain")
            self._passages.move_to_end(hit.url)
        while len(self._passages) > REMEMBERED_PASSAGES:
            self._passages.popitem(last=False)

    async def get(self, url: str) -> Page:
        if url in self._passages:
            return self._passages[url]
        if url.lower().startswith(("http://", "https://")):
            return await self._web.get(url)
        try:
            data = await self._http.request("POST", "/access", json={"urls": [url]})
        except BackendError as exc:
            raise PageError(f"{url} is not a passage a search returned in this session, and the retrieval server "
                            f"cannot look it up by id ({exc}); browse a URL from a search result.") from None
        found = data.get("result") if isinstance(data, dict) else None
        page = found[0] if isinstance(found, list) and found else None
        if not isinstance(page, dict) or not isinstance(page.get("contents"), str):
            raise PageError(f"{url}: the retrieval server has no passage with this id.")
        return Page(url=url, title=str(page.get("title") or ""), text=page["contents"], content_type="text/plain")

    async def aclose(self) -> None:
        await self._http.aclose()
        await self._web.aclose()
