"""The extractive reader: ranks a page's chunks against the question and query with BM25, no LLM.

It is the default reader because it is instant, deterministic and needs no model, which makes
CPU training and replayed rollouts cheap. BM25 is computed here over the chunks of one page (tens
of chunks): a search library's setup per page would cost more than the scoring itself.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from deepresearcher.text import fold_unicode
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.chunking import CHARS_PER_TOKEN, Chunk, iter_chunks
from deepresearcher.web.types import Note

if TYPE_CHECKING:
    from deepresearcher.config import Config

_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset("a an and are as at be by for from in is it of on or that the this to was were what "
                       "which who whom whose when where why how did does do".split())


def terms(text: str) -> list[str]:
    """Lower-cased, accent-folded word tokens without stopwords ("Café" matches "cafe")."""
    return [w for w in _WORD.findall(fold_unicode(text).lower()) if w not in _STOPWORDS]


def bm25_scores(query: list[str], documents: list[list[str]], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of each tokenized document for the tokenized query."""
    if not documents:
        return []
    n = len(documents)
    avg_len = sum(len(d) for d in documents) / n or 1.0
    df = Counter(t for d in documents for t in set(d))
    scores = []
    for doc in documents:
        tf = Counter(doc)
        norm = k1 * (1 - b + b * len(doc) / avg_len)
        scores.append(sum(
            math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] * (k1 + 1) / (tf[t] + norm)
            for t in query if tf[t]
        ))
    return scores


def normalize_note(text: str) -> str:
    """A note's identity for de-duplication: words only, lower case, accents folded."""
    return " ".join(_WORD.findall(fold_unicode(text).lower()))


def pick_passages(request: ReadRequest, chunks: list[Chunk], scores: list[float], top: int) -> list[Note]:
    """The ``top`` best-scoring chunks that the rollout does not already hold, returned in page order."""
    known = {normalize_note(n) for n in request.notes}
    ranked = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
    picked = [i for i in ranked if scores[i] > 0 and normalize_note(chunks[i].text) not in known][:top]
    return [Note(url=request.url, text=chunks[i].text.strip(), chunk=chunks[i].index) for i in sorted(picked)]


class ExtractiveReader:
    """Returns the ``top_passages`` chunks of the page that best match the question and the query."""

    name = "extractive"

    def __init__(self, *, chunk_chars: int = 600, max_chunks: int = 400, top_passages: int = 2) -> None:
        self.chunk_chars = chunk_chars
        self.max_chunks = max_chunks
        self.top_passages = top_passages

    @property
    def params(self) -> dict[str, Any]:
        """Everything besides the request that changes the output: part of the cache key."""
        return {"reader": self.name, "chunk_chars": self.chunk_chars, "max_chunks": self.max_chunks,
                "top_passages": self.top_passages}

    async def read(self, request: ReadRequest) -> list[Note]:
        chunk_tokens = max(1, self.chunk_chars // CHARS_PER_TOKEN)
        chunks = list(iter_chunks(request.text, chunk_tokens, max_chunks=self.max_chunks))
        query = terms(f"{request.question} {request.query}")
        scores = bm25_scores(query, [terms(c.text) for c in chunks])
        return pick_passages(request, chunks, scores, self.top_passages)


def build(config: Config) -> ExtractiveReader:
    """The reader ``browse.reader: extractive`` names, from the browse config."""
    browse = config.browse
    return ExtractiveReader(chunk_chars=browse.chunk_chars, max_chunks=browse.max_chunks,
                            top_passages=browse.top_passages)
