"""Plain data shapes shared by every search backend, page source, reader and the handler service.

They are the wire format too: the handler service serializes them with ``model_dump``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class SearchHit(BaseModel):
    """One search result, normalized across backends (the shape web search APIs return)."""

    title: str
    url: str
    snippet: str = ""


class QueryResult(BaseModel):
    """The hits of one query, as the policy sees them in a `web_search` observation."""

    query: str
    hits: list[SearchHit] = Field(default_factory=list)
    error: str | None = Field(None, description="Set when this query failed; the other queries still answer.")


class Page(BaseModel):
    """A fetched page before reading: raw HTML or plain text, with where it came from."""

    url: str
    title: str = ""
    html: str | None = None
    text: str | None = None
    content_type: str = "text/html"


class Note(BaseModel):
    """A piece of a page the reader judged relevant, with the chunk it came from."""

    url: str
    text: str
    chunk: int = Field(0, description="Index of the chunk of the page's clean text the note came from.")


class BrowseResult(BaseModel):
    """What `browse_webpage` returns for one URL: the new notes, or an error observation."""

    url: str
    title: str = ""
    notes: list[Note] = Field(default_factory=list)
    error: str | None = None
