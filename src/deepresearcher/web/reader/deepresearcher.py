"""The original DeepResearcher's reading agent: the paper's browsing agent, over any chat model (it used qwen-plus).

What it does for one page, as ``ReadingAgent.read`` of the original (``scrl/handler/reading_agent/``,
Apache-2.0) did:

- The page's text is cut into *viewports* of ``viewport_chars`` characters (40,960 in the original), each
  stretched to end just after a whitespace character (:func:`split_viewports`); each viewport goes through
  ``html2text`` before the model sees it, as the original did to its browser's viewport.
- From the first viewport on, the model gets one user message, ``EXTRACT_NEW_INFO_PROMPT`` filled with the
  question (``main_question``), the search query that surfaced the page (``sub_question``), the context so
  far, the page index (from 1) and the page count. It answers with ``<extracted_info>``, ``<page_down>`` and
  ``<short_summary>`` tags, read with the original's tag rule (:func:`tag_content`).
- A non-empty ``<extracted_info>`` becomes one :class:`Note` whose ``chunk`` is the viewport index (the
  original's ``page_number``, from 0), and joins the context of the next viewport.
- The loop goes on while ``<page_down>`` holds ``yes`` (case-sensitive, as the original tested it). Paging
  down from the last viewport stays on it (the original browser's ``page_down``), so a model that keeps
  saying yes re-reads the last viewport; the original had no bound there, this reader stops after
  ``max_reads`` calls. A reply without the tags is "nothing found, stop", as in the original.

The context so far starts with ``request.notes``: each note is what an earlier read of a page of the same
search gathered (its summaries, each followed by a blank line), shown as that page's
``<sub_question>``/``<useful_info>`` block, as the original built it from the other pages of the query.

Client failures (after the client's own retries) raise ``BackendError``: the environment turns them into a
per-page error, and they are never cached as "nothing found".
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from pathlib import Path
from typing import Any

from deepresearcher.config import Config, ReaderLLMConfig
from deepresearcher.errors import MissingDependencyError, PageError
from deepresearcher.llm.base import ChatClient
from deepresearcher.llm.factory import make_chat_client
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.deepresearcher_prompts import EXTRACT_NEW_INFO_PROMPT, TEMPERATURE, VIEWPORT_CHARS
from deepresearcher.web.types import Note

logger = logging.getLogger(__name__)

_WHITESPACE = frozenset(" \t\r\n")


def split_viewports(text: str, size: int = VIEWPORT_CHARS) -> list[tuple[int, int]]:
    """The ``(start, end)`` bounds of a text's viewports: ``size`` characters each, stretched to end on whitespace.

    An empty text has one empty viewport. The viewports tile the text exactly.

    >>> split_viewports("aaa bbb ccc", 4)
    [(0, 4), (4, 8), (8, 11)]
    >>> split_viewports("abcdef gh", 3)
    [(0, 7), (7, 9)]
    """
    if not text:
        return [(0, 0)]
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        while end < len(text) and text[end - 1] not in _WHITESPACE:
            end += 1
        bounds.append((start, end))
        start = end
    return bounds


def tag_content(text: str, tag: str) -> str:
    """The text after ``<tag>`` up to ``</tag>``, the next opening tag or the end, stripped; "" without ``<tag>``.

    The original's rule (``get_content_from_tag``): an unclosed tag still counts, and any ``<word``
    ends it.

    >>> tag_content("<page_down>yes</page_down>", "page_down")
    'yes'
    >>> tag_content("<extracted_info> Born 1931. <short_summary>Born.", "extracted_info")
    'Born 1931.'
    """
    match = re.search(rf"<{tag}>(.*?)(?=(</{tag}>|<\w+|$))", text, re.DOTALL)
    return match.group(1).strip() if match else ""


def page_markdown(viewport: str) -> str:
    """A viewport as the original's reader model saw it: through ``html2text`` (which treats it as HTML)."""
    try:
        import html2text
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever this reader is chosen
        raise MissingDependencyError(
            "browse.reader: deepresearcher needs html2text: pip install 'deepresearcher[paper-reader]'"
        ) from exc
    try:
        return html2text.html2text(viewport)
    except Exception as exc:  # noqa: BLE001 - a converter crash on odd markup is this page's failure, not a bug
        raise PageError(f"html2text could not render the page: {type(exc).__name__}: {exc}") from exc


class DeepResearcherReader:
    """Reads a page as the original's reading agent did; see the module docstring for the loop.

    ``max_tokens`` caps each reply (the original sent none; 8192 is qwen-plus's own cap); ``temperature``
    is the original's 0.6. The first reply without the tags is logged as a warning, later ones at DEBUG.
    """

    name = "deepresearcher"

    def __init__(
        self,
        client: ChatClient,
        *,
        viewport_chars: int = VIEWPORT_CHARS,
        max_reads: int = 16,
        max_tokens: int = 8192,
        temperature: float = TEMPERATURE,
    ) -> None:
        page_markdown("")  # fail at construction, not mid-rollout, when html2text is missing
        self.client = client
        self.viewport_chars = viewport_chars
        self.max_reads = max_reads
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.stats = {"pages": 0, "reads": 0, "notes": 0, "untagged_replies": 0, "last_page_rereads": 0,
                      "stopped_at_max_reads": 0}
        self._warned_untagged = False

    @property
    def params(self) -> dict[str, Any]:
        """Everything besides the request that changes the output: part of the cache key."""
        import html2text

        return {
            "reader": self.name,
            "model": self.client.model,
            "viewport_chars": self.viewport_chars,
            "max_reads": self.max_reads,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "prompt_sha256": hashlib.sha256(EXTRACT_NEW_INFO_PROMPT.encode()).hexdigest()[:16],
            "html2text": html2text.__version__,
        }

    @classmethod
    def from_config(
        cls, config: ReaderLLMConfig, client: ChatClient | None = None, cache_dir: Path | None = None
    ) -> DeepResearcherReader:
        """The reader of ``Config.reader_llm``: its client, ``viewport_chars`` and ``max_viewport_reads``.

        ``max_new_tokens`` and ``temperature`` apply when the config sets them; otherwise this reader keeps
        its own defaults (8192 and the original's 0.6), since the section's defaults suit the small ``llm``
        reader (256 tokens would cut the original's long replies before their ``<page_down>``).
        """
        chosen = config.model_fields_set
        sampling = {"max_tokens": config.max_new_tokens} if "max_new_tokens" in chosen else {}
        if "temperature" in chosen:
            sampling["temperature"] = config.temperature
        return cls(client or make_chat_client(config, cache_dir=cache_dir), viewport_chars=config.viewport_chars,
                   max_reads=config.max_viewport_reads, **sampling)

    async def aclose(self) -> None:
        """Release the model client's connections."""
        await self.client.aclose()

    def prompt(self, request: ReadRequest, context: str, page_index: int, total_pages: int, content: str) -> str:
        """The one user message of a read: the original prompt filled in (``page_index`` from 1)."""
        return EXTRACT_NEW_INFO_PROMPT.format(
            main_question=request.question, sub_question=request.query, context_so_far=context.strip(),
            page_index=page_index, total_pages=total_pages, page_content=content,
        )

    async def read(self, request: ReadRequest) -> list[Note]:
        """Read viewports from the first until the model stops paging down (or ``max_reads`` calls)."""
        self.stats["pages"] += 1
        prefix = "".join(
            f"<sub_question>{request.query}</sub_question>\n<useful_info>{note}</useful_info>\n"
            for note in request.notes if note
        )
        viewports = split_viewports(request.text, self.viewport_chars)
        current, gathered, found = 0, "", []
        for _ in range(self.max_reads):
            context = prefix
            if gathered:
                context += f"<sub_question>{request.query}</sub_question>\n<useful_info>{gathered}</useful_info>"
            start, end = viewports[current]
            # html2text is pure Python (~30 ms a 40,960-character viewport): off the event loop.
            content = await asyncio.to_thread(page_markdown, request.text[start:end])
            message = self.prompt(request, context, current + 1, len(viewports), content)
            result = await self.client.chat([{"role": "user", "content": message}], max_tokens=self.max_tokens,
                                            temperature=self.temperature)
            self.stats["reads"] += 1
            reply = result.text.strip()
            extracted = tag_content(reply, "extracted_info")
            page_down = "yes" in tag_content(reply, "page_down")
            if "<extracted_info>" not in reply and "<page_down>" not in reply:
                self._log_untagged(request.url, current, reply)
            if extracted:
                found.append(Note(url=request.url, text=extracted, chunk=current))
                gathered += extracted + "\n\n"
                self.stats["notes"] += 1
            if not page_down:
                return found
            if current == len(viewports) - 1:
                self.stats["last_page_rereads"] += 1
            current = min(current + 1, len(viewports) - 1)
        self.stats["stopped_at_max_reads"] += 1
        return found

    def _log_untagged(self, url: str, viewport: int, reply: str) -> None:
        self.stats["untagged_replies"] += 1
        if self._warned_untagged:
            logger.debug("reader reply without tags for %s page %d: nothing found, stop", url, viewport)
            return
        self._warned_untagged = True
        logger.warning(
            "reader model %s answered without <extracted_info>/<page_down> for %s page %d; as in the original, that "
            "is nothing found, stop (logged once; later ones at DEBUG): %r", self.client.model, url, viewport,
            reply[:200],
        )


def build(config: Config) -> DeepResearcherReader:
    """The reader ``browse.reader: deepresearcher`` names, from ``reader_llm``."""
    return DeepResearcherReader.from_config(config.reader_llm, cache_dir=config.resolved_cache_dir())
