"""The LLM reader: the paper's browsing agent, reading a page chunk by chunk for one question.

For each chunk, in order, the reader model sees the question, the search query that led to the
page, the notes gathered so far and the chunk, and replies in a two-field format::

    NOTES: <facts from this part that help answer the question, or NONE>
    CONTINUE: <YES to read the next part, NO to stop>

The loop always ends: when the model says NO, at the last chunk, or after ``max_chunks`` chunks
(the original could re-read its last chunk forever). A reply that cannot be parsed counts as
"nothing found, stop"; the first one is logged as a warning, later ones only at DEBUG, so a weak
reader model cannot flood the logs. Notes the rollout already holds are never returned again.

The reader is a pure async function of its :class:`ReadRequest` and its parameters (``params``), so
the record/replay cache can key on both. Client failures (after the client's own retries) raise
``BackendError``: they are not content, and must not be cached as "nothing found".
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearcher.config import Config, ReaderLLMConfig
from deepresearcher.llm.base import ChatClient, Message
from deepresearcher.llm.factory import make_chat_client
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.chunking import Chunk, iter_chunks
from deepresearcher.web.types import Note

logger = logging.getLogger(__name__)

PROMPT_VERSION = 2
"""Bumped whenever the prompt changes, so cached reader outputs of an older prompt are not reused."""

SYSTEM_PROMPT = (
    "You read one part of a web page for a researcher. Copy the facts from this part that help answer "
    "the question. Do not repeat the notes the researcher already has. Reply in exactly this format:\n"
    "NOTES: <relevant facts copied from the page part, or NONE>\n"
    "CONTINUE: <YES if later parts of the page may hold more relevant facts, otherwise NO>"
)

DEFAULT_PREFILL = "NOTES:"
"""The reply start given to local reader models, which keeps small ones on the two-field format."""

_NONE_WORDS = frozenset({"none", "nothing", "n/a", "na", "no", "null", "-", "no relevant information", ""})
_NOTES_LABEL = r"(?:notes?|info(?:rmation)?|relevant(?:\s+(?:info(?:rmation)?|facts?))?|facts?|extract(?:ed)?)"
_CONTINUE_LABEL = r"(?:continue|next|read[\s_-]*(?:more|on)|page[\s_-]*down|more)"
_FIELD = re.compile(
    rf"^[\s>*#-]*(?:\*\*)?(?P<label>{_NOTES_LABEL}|{_CONTINUE_LABEL})(?:\*\*)?\s*[:：=]\s*(?:\*\*)?",
    re.IGNORECASE | re.MULTILINE,
)
_YES = re.compile(r"^\W*(yes|true|y|continue|read|1)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|false|n|stop|done|0)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ReaderReply:
    """A parsed reader reply: the new facts (empty when none) and whether to read the next chunk."""

    notes: str
    read_on: bool


def _is_none(text: str) -> bool:
    return text.strip().strip(".*_`'\"").strip().lower() in _NONE_WORDS


def _parse_json(text: str) -> ReaderReply | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    notes = next((lowered[k] for k in ("notes", "note", "information", "info", "facts") if k in lowered), None)
    more = next((lowered[k] for k in ("continue", "read_more", "next", "page_down") if k in lowered), None)
    if notes is None and more is None:
        return None
    if isinstance(notes, list):
        notes = "\n".join(str(n) for n in notes)
    notes_text = "" if notes is None or _is_none(str(notes)) else str(notes).strip()
    read_on = more if isinstance(more, bool) else bool(more is None or _YES.match(str(more)))
    return ReaderReply(notes_text, read_on)


def parse_reply(text: str) -> ReaderReply | None:
    """Parse a reader reply (the two-field format, tolerant of markdown and synonyms, or JSON); None if unusable.

    >>> parse_reply("NOTES: Paris is the capital of France.\\nCONTINUE: NO")
    ReaderReply(notes='Paris is the capital of France.', read_on=False)
    >>> parse_reply("**Notes**: none\\n**Continue**: yes")
    ReaderReply(notes='', read_on=True)
    >>> parse_reply("I like turtles") is None
    True
    """
    matches = list(_FIELD.finditer(text))
    if not matches:
        return _parse_json(text)
    notes: list[str] = []
    read_on: bool | None = None
    for i, match in enumerate(matches):
        value = text[match.end() : matches[i + 1].start() if i + 1 < len(matches) else len(text)].strip()
        if re.fullmatch(_CONTINUE_LABEL, match.group("label"), re.IGNORECASE):
            if read_on is None:
                read_on = bool(_YES.match(value)) if (_YES.match(value) or _NO.match(value)) else None
        elif not _is_none(value):
            notes.append(value)
    if not notes and read_on is None:
        return None
    return ReaderReply("\n".join(notes).strip(), True if read_on is None else read_on)


_ECHO = re.compile(r"^\s*(---|page https?://|question:|search query:|already known:|reply with)", re.IGNORECASE)


def clean_note(text: str) -> str:
    """Drop what small models add to a note: repeated lines and echoes of the prompt (from the first echo on).

    >>> clean_note("Born in 1931.\\nBorn in 1931.\\n---\\nReply with NOTES and CONTINUE.")
    'Born in 1931.'
    """
    kept: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        if _ECHO.match(line):
            break
        key = _normalize(line)
        if key and key not in seen:
            seen.add(key)
            kept.append(line.strip())
    return "\n".join(kept)


def _normalize(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


class LLMReader:
    """Reads a page with any :class:`ChatClient`; see the module docstring for the loop and the format.

    ``tokenizer`` (a Hugging Face fast tokenizer) makes chunks exact in the reader model's tokens;
    without one, four characters count as a token. ``prefill`` (e.g. ``"NOTES:"``) starts the model's
    reply for it, which keeps small models on the format; the client must support continuing a final
    assistant message (local clients do; vLLM and SGLang do with their ``continue_final_message`` flag).
    """

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        *,
        chunk_tokens: int = 512,
        max_chunks: int = 4,
        max_note_chars: int = 1200,
        max_new_tokens: int = 256,
        tokenizer: Any = None,
        notes_context_chars: int = 1500,
        prefill: str = "",
    ) -> None:
        self.client = client
        self.prefill = prefill
        self.chunk_tokens = chunk_tokens
        self.max_chunks = max_chunks
        self.max_note_chars = max_note_chars
        self.max_new_tokens = max_new_tokens
        self.tokenizer = tokenizer
        self.notes_context_chars = notes_context_chars
        self.stats = {"pages": 0, "chunks_read": 0, "unusable_replies": 0, "notes": 0, "duplicates_dropped": 0}
        self._warned_unusable = False

    @property
    def params(self) -> dict[str, Any]:
        """Everything besides the request that changes the output: part of the cache key."""
        return {
            "reader": self.name,
            "model": self.client.model,
            "chunk_tokens": self.chunk_tokens,
            "max_chunks": self.max_chunks,
            "max_note_chars": self.max_note_chars,
            "max_new_tokens": self.max_new_tokens,
            "tokenized": self.tokenizer is not None,
            "prompt_version": PROMPT_VERSION,
            "prefill": self.prefill,
        }

    @classmethod
    def from_config(
        cls, config: ReaderLLMConfig, client: ChatClient | None = None, cache_dir: Path | None = None
    ) -> LLMReader:
        """The reader of ``Config.reader_llm``; local models chunk by their own tokens and get a prefill."""
        client = client or make_chat_client(config, cache_dir=cache_dir)
        local = config.kind in ("local", "embedded")
        return cls(
            client, chunk_tokens=config.chunk_tokens, max_chunks=config.max_chunks,
            max_note_chars=config.max_note_chars, max_new_tokens=config.max_new_tokens,
            tokenizer=getattr(client, "tokenizer", None) if local else None, prefill=DEFAULT_PREFILL if local else "",
        )

    async def aclose(self) -> None:
        """Release the model client's connections."""
        await self.client.aclose()

    def build_messages(self, request: ReadRequest, chunk: Chunk, is_last: bool, notes: list[str]) -> list[Message]:
        """The prompt for one chunk; the question comes first and again last, where small models attend best.

        The notes so far are cut to their last ``notes_context_chars`` characters.
        """
        so_far = "\n".join(f"- {n}" for n in notes)[-self.notes_context_chars :] or "(nothing yet)"
        where = f"part {chunk.index + 1}" + (", the last part" if is_last else "")
        user = (
            f"Question: {request.question}\n\n"
            f"Page {request.url}, {where}:\n---\n{chunk.text}\n---\n"
            f"Already known:\n{so_far}\n\n"
            f"Search query: {request.query or '(unknown)'}\n"
            f"Question: {request.question}\n"
            "Copy the facts from this page part that help answer the question. Reply with NOTES and CONTINUE."
        )
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        if self.prefill:
            messages.append({"role": "assistant", "content": self.prefill})
        return messages

    async def read(self, request: ReadRequest) -> list[Note]:
        """Walk the page's chunks until the model stops, the page ends, or the chunk budget is spent."""
        self.stats["pages"] += 1
        known = [_normalize(n) for n in request.notes]
        notes_so_far = list(request.notes)
        found: list[Note] = []
        chunks = iter_chunks(request.text, self.chunk_tokens, tokenizer=self.tokenizer, max_chunks=self.max_chunks)
        chunk = next(chunks, None)
        while chunk is not None:
            following = next(chunks, None)
            result = await self.client.chat(
                self.build_messages(request, chunk, following is None, notes_so_far), max_tokens=self.max_new_tokens
            )
            self.stats["chunks_read"] += 1
            reply = parse_reply(self.prefill + result.text)
            if reply is None:
                self._log_unusable(request.url, chunk.index, result.text)
                break
            if reply.notes:
                text = clean_note(reply.notes)[: self.max_note_chars].strip()
                norm = _normalize(text)
                if norm and not any(norm in k for k in known):
                    found.append(Note(url=request.url, text=text, chunk=chunk.index))
                    known.append(norm)
                    notes_so_far.append(text)
                    self.stats["notes"] += 1
                else:
                    self.stats["duplicates_dropped"] += 1
            if not reply.read_on:
                break
            chunk = following
        return found

    def _log_unusable(self, url: str, chunk: int, text: str) -> None:
        self.stats["unusable_replies"] += 1
        if self._warned_unusable:
            logger.debug("unusable reader reply for %s chunk %d; treated as nothing found, stop", url, chunk)
            return
        self._warned_unusable = True
        logger.warning(
            "reader model %s gave a reply without NOTES/CONTINUE for %s chunk %d; treating it as nothing found "
            "and stopping (logged once; later ones at DEBUG): %r",
            self.client.model, url, chunk, text[:200],
        )


def build(config: Config) -> LLMReader:
    """The reader ``browse.reader: llm`` names, from ``reader_llm``."""
    return LLMReader.from_config(config.reader_llm, cache_dir=config.resolved_cache_dir())
