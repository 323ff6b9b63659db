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


class Passage(BaseModel):
    """One retrieved document with its full text and score: what a Search-R1-style retriever returns.

    ``id`` is the corpus's own id (a wiki-18 passage number, else the URL), so evaluation scripts that
    compare ids keep working; ``contents`` renders it the way Search-R1's clients parse it.
    """

    id: str
    title: str = ""
    url: str = ""
    text: str = ""
    score: float = 0.0
    contents_head: str | None = Field(
        None, description="What precedes the text in the corpus's own contents, where it is not `\"Title\"\\n`."
    )

    @property
    def contents(self) -> str:
        """``"Title"\\ntext`` (Search-R1's clients split the title off at the first newline), or the corpus
        line's own contents, byte for byte, where it had another head (``contents_head``)."""
        head = self.contents_head if self.contents_head is not None else f'"{self.title}"\n'
        return head + self.text


def split_contents(contents: str) -> tuple[str, str]:
    """``"Title"\\ntext`` -> (title, text), as Search-R1's clients read it; no newline: no title."""
    title, newline, text = contents.partition("\n")
    if not newline:
        return "", contents.strip()
    return title.strip().strip('"'), text.strip()


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
