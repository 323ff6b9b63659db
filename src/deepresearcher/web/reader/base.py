"""The protocol every page reader implements (the browsing agent of the paper).

A reader receives the page's clean text and the research context, and returns the passages that
matter for the question. Readers are one file each under ``web/reader/``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from deepresearcher.web.types import Note


class ReadRequest(BaseModel):
    """Everything a reader may use: the question, the query that led to the page, notes so far."""

    question: str
    url: str
    text: str = Field(description="The page's clean text (already extracted from HTML).")
    query: str = Field("", description="The search query that surfaced this page, if known.")
    notes: list[str] = Field(default_factory=list, description="Notes this rollout already holds (any page).")


@runtime_checkable
class Reader(Protocol):
    """Reads one page for one question."""

    name: str

    async def read(self, request: ReadRequest) -> list[Note]:
        """Return the new relevant notes from the page; never raises for unreadable content."""
        ...
