"""Split a page's clean text into chunks of at most N tokens, lazily, with bounded memory.

Readers walk chunks in order and usually stop early, so chunks are produced one at a time: each
step tokenizes only a window of ``chunk_tokens * WINDOW_CHARS_PER_TOKEN`` characters after the
current position, never the whole page. A 5 MB page costs the same as a 5 kB one per chunk, and a
page that is one giant line is cut like any other. Cuts prefer a paragraph, line or word boundary
in the last part of a chunk. Without a tokenizer, ``CHARS_PER_TOKEN`` characters stand for a token.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
"""Characters counted as one token when no tokenizer is given (English averages about four)."""
WINDOW_CHARS_PER_TOKEN = 8
"""Characters looked at per wanted token; dense scripts need fewer, so a window always fills a chunk."""
_SNAP_FRACTION = 0.2  # how far back from a hard cut we look for a nicer boundary


@dataclass(frozen=True)
class Chunk:
    """One piece of a page: its position among the chunks and its character span in the text."""

    index: int
    start: int
    end: int
    text: str


def _snap(text: str, start: int, hard_end: int, text_end: int) -> int:
    """Move a cut back to a paragraph, line, sentence or word boundary near ``hard_end``, if one is close."""
    if hard_end >= text_end:
        return text_end
    floor = start + int((hard_end - start) * (1 - _SNAP_FRACTION))
    for sep in ("\n\n", "\n", ". ", " "):
        pos = text.rfind(sep, floor, hard_end)
        if pos > start:
            return pos + len(sep)
    return hard_end


def _token_end(tokenizer: Any, window: str, max_tokens: int) -> int:
    """Character offset in ``window`` after its first ``max_tokens`` tokens (the window's end if fewer)."""
    offsets = tokenizer(window, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= max_tokens:
        return len(window)
    return int(offsets[max_tokens][0]) or int(offsets[max_tokens - 1][1])


def iter_chunks(
    text: str, chunk_tokens: int, *, tokenizer: Any = None, max_chunks: int | None = None
) -> Iterator[Chunk]:
    """Yield chunks of ``text`` of at most ``chunk_tokens`` tokens, in order, at most ``max_chunks`` of them.

    ``tokenizer`` is a Hugging Face *fast* tokenizer (it must return offsets); ``None`` counts characters.
    Whitespace-only text yields no chunks.

    >>> [c.text for c in iter_chunks("alpha beta gamma delta", 3)]
    ['alpha beta ', 'gamma delta']
    """
    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be at least 1")
    use_tokens = tokenizer is not None and getattr(tokenizer, "is_fast", False)
    pos, index, end_of_text = 0, 0, len(text)
    while pos < end_of_text and (max_chunks is None or index < max_chunks):
        while pos < end_of_text and text[pos].isspace():
            pos += 1
        if pos >= end_of_text:
            return
        if use_tokens:
            window = text[pos : pos + chunk_tokens * WINDOW_CHARS_PER_TOKEN]
            hard_end = pos + max(1, _token_end(tokenizer, window, chunk_tokens))
        else:
            hard_end = min(end_of_text, pos + chunk_tokens * CHARS_PER_TOKEN)
        end = _snap(text, pos, hard_end, end_of_text)
        yield Chunk(index=index, start=pos, end=end, text=text[pos:end])
        pos, index = end, index + 1


def chunk_text(text: str, chunk_tokens: int, *, tokenizer: Any = None, max_chunks: int | None = None) -> list[Chunk]:
    """All chunks of ``text`` (up to ``max_chunks``) as a list; see :func:`iter_chunks`."""
    return list(iter_chunks(text, chunk_tokens, tokenizer=tokenizer, max_chunks=max_chunks))
