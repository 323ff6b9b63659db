"""Loopback servers that speak the real Serper, SearXNG, Brave and Search-R1 retriever formats, for tests and benchmarks.

Each answers from a small in-memory corpus ranked with BM25, checks the API key like the real service,
counts the calls that reach it, and can be scripted to fail: answer 429 with a Retry-After, 500, or
slowly. So the live backends, the resilience layer and the cache run over real HTTP with no internet.

Example::

    docs = [{"url": "https://example.org/dune", "title": "Dune", "text": "Dune is a novel by Frank Herbert."}]
    with SearchEmulator(docs, flavor="serper", api_key="test-key").running() as emu:
        backend = SerperBackend("test-key", base_url=emu.base_url)
        emu.script(Fault(429, retry_after=0.05))   # the next request is rate-limited
        ...
        emu.calls                                  # every request that reached the server

The ``search-r1`` flavor is Search-R1's retrieval server (``search_r1/search/retrieval_server.py``):
``POST /retrieve`` with ``{"queries", "topk", "return_scores"}``, documents ``{"id", "contents"}`` with
``contents = '"Title"\ntext'``, ``topk`` missing or 0 meaning its default (3), a query with no hits
answered with an empty list, and pydantic's 422 for a malformed body, as their FastAPI app does.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from deepresearcher.testing._serve import serve_in_thread

Flavor = Literal["serper", "searxng", "brave", "search-r1"]
_WORD = re.compile(r"\w+", re.UNICODE)

# Where each flavor listens, and the header that carries its key.
_ROUTES: dict[str, tuple[str, str, str | None]] = {
    "serper": ("POST", "/search", "X-API-KEY"),
    "searxng": ("GET", "/search", None),
    "brave": ("GET", "/res/v1/web/search", "X-Subscription-Token"),
    "search-r1": ("POST", "/retrieve", None),
}
SEARCH_R1_DEFAULT_TOPK = 3  # their server's --topk default


@dataclass(frozen=True)
class Fault:
    """One scripted bad answer: an HTTP status, optionally a Retry-After (seconds) and a delay first."""

    status: int = 500
    retry_after: float | None = None
    delay_s: float = 0.0


class Corpus:
    """BM25 over an inverted index of a few thousand documents: enough ranking to make results meaningful."""

    def __init__(self, docs: Iterable[dict[str, str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [{"url": d.get("url", ""), "id": str(d.get("id", d.get("url", ""))), "title": d.get("title", ""),
                      "text": d.get("text", "")} for d in docs]
        self.k1, self.b = k1, b
        self._postings: dict[str, list[tuple[int, int]]] = {}
        lengths = []
        for i, doc in enumerate(self.docs):
            tf = Counter(_tokens(doc["title"] + " " + doc["text"]))
            lengths.append(sum(tf.values()))
            for term, count in tf.items():
                self._postings.setdefault(term, []).append((i, count))
        avg = sum(lengths) / len(lengths) if lengths else 1.0
        self._norm = [k1 * (1 - b + b * n / avg) for n in lengths]
        n = len(self.docs)
        self._idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self._postings.items()}

    def ranked(self, query: str, top_k: int) -> list[tuple[dict[str, str], float]]:
        """Up to ``top_k`` ``(doc, BM25 score)`` pairs, best first; documents sharing no term are left out."""
        scores: dict[int, float] = {}
        for term in set(_tokens(query)):
            idf = self._idf.get(term, 0.0)
            for i, f in self._postings.get(term, ()):
                scores[i] = scores.get(i, 0.0) + idf * f * (self.k1 + 1) / (f + self._norm[i])
        best = heapq.nsmallest(top_k, ((-score, i) for i, score in scores.items()))
        return [(self.docs[i], -neg) for neg, i in best]

    def search(self, query: str, top_k: int) -> list[tuple[dict[str, str], str]]:
        """Up to ``top_k`` ``(doc, snippet)`` pairs, best first."""
        terms = set(_tokens(query))
        return [(doc, _snippet(doc["text"], terms)) for doc, _ in self.ranked(query, top_k)]


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _snippet(text: str, terms: set[str], width: int = 200) -> str:
    lowered = text.casefold()
    starts = [lowered.find(t) for t in terms if lowered.find(t) >= 0]
    start = max(0, min(starts) - width // 4) if starts else 0
    return text[start : start + width].strip()


class SearchEmulator:
    """A loopback search API in the format of ``flavor``; see the module docstring."""

    def __init__(
        self,
        docs: Iterable[dict[str, str]] = (),
        *,
        flavor: Flavor = "serper",
        api_key: str | None = None,
        delay_s: float = 0.0,
    ) -> None:
        if flavor not in _ROUTES:
            raise ValueError(f"Unknown emulator flavor {flavor!r}; use one of {', '.join(_ROUTES)}.")
        self.flavor = flavor
        self.corpus = Corpus(docs)
        self.api_key = api_key
        self.delay_s = delay_s
        self.base_url = ""
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.queries: list[str] = []
        self._faults: deque[Fault] = deque()
        self._always: Fault | None = None

    # ------------------------------------------------------------------ scripting

    def script(self, *faults: Fault) -> None:
        """The next ``len(faults)`` requests get these answers, in order; later ones are normal again."""
        self._faults.extend(faults)

    def fail_always(self, fault: Fault | None) -> None:
        """Answer every request with ``fault`` (a dead upstream) until called with None."""
        self._always = fault

    def reset_counts(self) -> None:
        self.calls = 0
        self.max_in_flight = 0
        self.queries.clear()

    # ------------------------------------------------------------------ HTTP

    def app(self) -> web.Application:
        method, path, _ = _ROUTES[self.flavor]
        application = web.Application()
        application.router.add_route(method, path, self._handle)
        return application

    async def _handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer_request(request)
        finally:
            self.in_flight -= 1

    async def _answer_request(self, request: web.Request) -> web.Response:
        fault = self._faults.popleft() if self._faults else self._always
        if fault is not None:
            if fault.delay_s:
                await asyncio.sleep(fault.delay_s)
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            return web.json_response({"message": f"scripted {fault.status}"}, status=fault.status, headers=headers)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.flavor == "search-r1":
            return await self._retrieve(request)
        key_header = _ROUTES[self.flavor][2]
        if self.api_key is not None and key_header and request.headers.get(key_header) != self.api_key:
            return web.json_response({"message": "Unauthorized.", "statusCode": 403}, status=403)
        if self.flavor == "serper":
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"message": "Body must be JSON."}, status=400)
            query, num = str(body.get("q", "")), int(body.get("num", 10))
        else:
            query = request.query.get("q", "")
            num = int(request.query.get("count", 10))
            if self.flavor == "searxng" and request.query.get("format") != "json":
                return web.Response(status=403, text="format not allowed")  # as SearXNG without json enabled
        if not query.strip():
            return web.json_response({"message": "Missing query."}, status=400)
        self.queries.append(query)
        return web.json_response(self._answer(query, self.corpus.search(query, num)))

    async def _retrieve(self, request: web.Request) -> web.Response:
        """Search-R1's ``retrieve_endpoint``: batch BM25, documents in their corpus format."""
        try:
            body = await request.json()
        except ValueError:
            return _unprocessable("body", "JSON decode error")
        queries = body.get("queries") if isinstance(body, dict) else None
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            return _unprocessable("queries", "Input should be a valid list of strings")
        topk = body.get("topk") or SEARCH_R1_DEFAULT_TOPK
        self.queries.extend(queries)
        result = []
        for query in queries:
            docs = [({"id": d["id"], "contents": f'"{d["title"]}"\n{d["text"]}'}, score)
                    for d, score in self.corpus.ranked(query, int(topk))]
            result.append([{"document": d, "score": s} for d, s in docs] if body.get("return_scores")
                          else [d for d, _ in docs])
        return web.json_response({"result": result})

    def _answer(self, query: str, found: list[tuple[dict[str, str], str]]) -> dict[str, Any]:
        if self.flavor == "serper":
            return {
                "searchParameters": {"q": query, "type": "search", "num": len(found), "engine": "google"},
                "organic": [
                    {"title": d["title"], "link": d["url"], "snippet": s, "position": i + 1}
                    for i, (d, s) in enumerate(found)
                ],
                "credits": 1,
            }
        if self.flavor == "searxng":
            return {
                "query": query,
                "number_of_results": len(found),
                "results": [
                    {"title": d["title"], "url": d["url"], "content": s, "engine": "emulator", "score": 1.0}
                    for d, s in found
                ],
                "answers": [],
                "suggestions": [],
            }
        return {
            "type": "search",
            "query": {"original": query},
            "web": {
                "type": "search",
                "results": [
                    {"title": d["title"], "url": d["url"], "description": _highlight(s, query)} for d, s in found
                ],
            },
        }

    @contextmanager
    def running(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[SearchEmulator]:
        """Serve in a background thread with its own event loop; sets :attr:`base_url`."""
        with serve_in_thread(self.app(), f"{self.flavor}-emulator", host, port) as url:
            self.base_url = url
            yield self


def _unprocessable(field: str, message: str) -> web.Response:
    """FastAPI's answer to a body that fails validation."""
    return web.json_response({"detail": [{"type": "value_error", "loc": ["body", field], "msg": message}]}, status=422)


def _highlight(snippet: str, query: str) -> str:
    """Brave wraps matched words in <strong>; do the same so clients must strip tags."""
    words = {w for w in _tokens(query) if len(w) > 2}
    return re.sub(r"\w+", lambda m: f"<strong>{m.group(0)}</strong>" if m.group(0).casefold() in words else m.group(0),
                  snippet)
