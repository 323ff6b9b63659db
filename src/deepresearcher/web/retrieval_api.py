"""The retriever API of the field, answered by the handler service: Search-R1's ``/retrieve`` and ASearcher's ``/access``.

Search-R1 and ASearcher train against a retrieval server that speaks::

    POST /retrieve  {"queries": ["q1", "q2"], "topk": 3, "return_scores": true}
        -> {"result": [[{"document": {"id", "contents", ...}, "score": 12.3}, ...], ...]}
           (without return_scores: {"result": [[{"id", "contents", ...}, ...], ...]})
    POST /access    {"urls": ["u1", "u2"]}  -> {"result": [{"url", "title", "contents"} | null, ...]}

``contents`` is ``"Title"\\ntext`` (their clients split the title off at the first newline), byte for byte
as the corpus line had it when the index was built from Search-R1's format; a document
also carries ``url`` and ``title``, which ASearcher's client reads. As in their servers, ``topk`` missing
or 0 means the default, a ``topk`` above the index size returns every match, extra request fields are ignored, and a query with no hits (or an empty query)
gets an empty list. A query that fails upstream gets an empty list too: their clients have no per-query
error, and failing the whole batch would crash their rollouts; the failure is logged.

The documents come from the environment's ``retrieve`` (``WebEnvironment.retrieve``: the local index's
full passages with BM25 scores, or a live backend's hits through its resilience and the cache), pages
from its ``read_page``.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

import orjson
from pydantic import BaseModel, ConfigDict, Field

from deepresearcher.errors import ConfigError, DeepResearcherError, ReplayMissError
from deepresearcher.web.types import Page, Passage


class RetrieveRequest(BaseModel):
    """Body of ``POST /retrieve``, as Search-R1's ``QueryRequest`` (unknown fields ignored, like theirs)."""

    model_config = ConfigDict(extra="ignore")

    queries: list[str] = Field(description="Queries, answered in order; an empty one gets no documents.")
    topk: int | None = Field(None, ge=0, description="Documents per query (more than the index holds: every match); "
                             "missing or 0: search.top_k.")
    return_scores: bool = Field(False, description="Wrap each document as {document, score}.")


class AccessRequest(BaseModel):
    """Body of ``POST /access`` (ASearcher): pages by URL."""

    model_config = ConfigDict(extra="ignore")

    urls: list[str] = Field(description="Pages to return as clean text, in order; a page that cannot be read is null.")


@runtime_checkable
class RetrievalSource(Protocol):
    """What an environment offers besides search and browse to answer the retriever API."""

    async def retrieve(self, queries: list[str], top_k: int) -> list[list[Passage]]: ...

    async def read_page(self, url: str) -> Page: ...


def _document(passage: Passage) -> dict[str, str]:
    return {"id": passage.id, "contents": passage.contents, "title": passage.title, "url": passage.url}


async def retrieve(source: RetrievalSource, request: RetrieveRequest, default_top_k: int) -> bytes:
    """The JSON answer to ``request``; blank queries are answered without reaching the source."""
    top_k = request.topk or default_top_k
    asked = [q for q in request.queries if q.strip()]
    found = iter(await source.retrieve(asked, top_k) if asked else [])
    result = []
    for query in request.queries:
        passages = next(found) if query.strip() else []
        if request.return_scores:
            result.append([{"document": _document(p), "score": p.score} for p in passages])
        else:
            result.append([_document(p) for p in passages])
    return orjson.dumps({"result": result})


async def access(source: RetrievalSource, request: AccessRequest) -> tuple[bytes, int]:
    """The JSON answer to ``request`` (pages read concurrently) and how many were null."""
    pages = await asyncio.gather(*(_page(source, url) for url in request.urls))
    return orjson.dumps({"result": pages}), sum(1 for p in pages if p is None)


async def _page(source: RetrievalSource, url: str) -> dict[str, str] | None:
    try:
        page = await source.read_page(url)
    except (ReplayMissError, ConfigError):  # the user's to fix: the request fails, as in /v1/browse
        raise
    except DeepResearcherError:
        return None
    return {"url": page.url, "title": page.title, "contents": page.text or ""}
