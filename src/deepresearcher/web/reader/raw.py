"""The raw reader: the first N tokens of the page's clean text, unread and unranked.

A baseline and a cheap fallback: no model, no ranking, the same bounded output for any page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.chunking import iter_chunks
from deepresearcher.web.types import Note

if TYPE_CHECKING:
    from deepresearcher.config import Config


class RawReader:
    """Returns the page's first ``max_tokens`` tokens as one note (none if the rollout already has it)."""

    name = "raw"

    def __init__(self, max_tokens: int = 512, *, tokenizer: Any = None) -> None:
        self.max_tokens = max_tokens
        self.tokenizer = tokenizer

    @property
    def params(self) -> dict[str, Any]:
        """Everything besides the request that changes the output: part of the cache key."""
        return {"reader": self.name, "max_tokens": self.max_tokens, "tokenized": self.tokenizer is not None}

    async def read(self, request: ReadRequest) -> list[Note]:
        first = next(iter_chunks(request.text, self.max_tokens, tokenizer=self.tokenizer, max_chunks=1), None)
        if first is None:
            return []
        text = first.text.strip()
        if any(text == note.strip() for note in request.notes):
            return []
        return [Note(url=request.url, text=text, chunk=0)]


def build(config: Config) -> RawReader:
    """The reader ``browse.reader: raw`` names: as many tokens as the extractive reader's passages hold."""
    return RawReader(max_tokens=max(1, config.browse.chunk_chars // 4) * config.browse.top_passages)
