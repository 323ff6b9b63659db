"""Any Search-R1-style retrieval server (their E5 or BM25 index, FlashRAG, ``deepresearcher serve``): ``POST {base}/retrieve``.

Request ``{"queries": [query], "topk": top_k, "return_scores": true}``; answer
``{"result": [[{"document": {"id", "contents", ...}, "score"}, ...]]}`` where ``contents`` is
``"Title"\\ntext``. A hit's title is the first line without its quotes, its snippet the passage text
(passages are short: the passage *is* what the policy reads, as in Search-R1), and its URL the
document's ``url`` when the server gives one, else its ``id``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deepresearcher.errors import ConfigError
from deepresearcher.web.backends._http import JsonHttp, require
from deepresearcher.web.types import SearchHit, split_contents

if TYPE_CHECKING:
    from deepresearcher.config import BackendSettings


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
    return SearchHit(title=title, url=str(where if where is not None else ""), snippet=" ".join(text.split()))
