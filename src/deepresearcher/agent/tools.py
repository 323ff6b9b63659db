"""The paper's two tools, ``web_search`` and ``browse_webpage``: schemas, argument checks, observations.

A ToolBox executes one parsed call against any ``Environment`` (in process or the handler service)
and always answers with an observation: bad arguments, unknown tools and environment failures come
back as text that tells the policy what went wrong, never as an exception.

Observation formats, as the policy sees them inside ``<tool_response>`` (``browse.observation_format``)::

    json (the paper's):
    web_search     -> [{"search_query": q, "web_page_info_list": [{"title", "url", "quick_summary"}, ...]}, ...]
    browse_webpage -> [{"url": u, "information": "notes the reader kept for the question"}, ...]

    compact (the same content as plain lines, for small models):
    web_search     -> "search: q\n1. title | url | summary\n2. ..."
    browse_webpage -> "page: url\nnotes"  (or "page: url\nerror: ...")
    (``browse.observation_echo = false``: a call with one query or one URL leaves out its "search:" or "page:" line)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from deepresearcher.config import Config
from deepresearcher.web.interface import Environment

logger = logging.getLogger(__name__)

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web. Give one or more queries; each returns pages with a title, URL and "
            "a short summary.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "array", "items": {"type": "string"},
                                         "description": "Search queries, at most 3 are run."}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "browse_webpage",
            "description": "Read web pages found by a search and return what they say about the question.",
            "parameters": {
                "type": "object",
                "properties": {"url_list": {"type": "array", "items": {"type": "string"},
                                            "description": "URLs to read, at most 3."}},
                "required": ["url_list"],
            },
        },
    },
]
TOOL_NAMES: tuple[str, ...] = tuple(t["function"]["name"] for t in TOOL_SCHEMAS)


@dataclass
class ToolContext:
    """What one rollout has done so far; the ToolBox updates it after every call."""

    question: str
    queries: list[str] = field(default_factory=list)
    searched_urls: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


@dataclass
class ToolOutcome:
    """One call's observation text (for the policy), error (if any), and raw JSON-able result."""

    text: str
    error: str | None = None
    raw: Any = None
    seconds: float = 0.0


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _compact(observation: list[dict[str, Any]], echo: bool = True) -> str:
    """The raw observation of either tool as plain lines (``browse.observation_format = compact``); without
    ``echo``, a lone block leaves out the line naming its query or URL (``browse.observation_echo``)."""
    echo = echo or len(observation) > 1
    blocks = []
    for entry in observation:
        if "search_query" in entry:
            lines = [f"search: {entry['search_query']}"] if echo else []
            if entry.get("error"):
                lines.append(f"error: {entry['error']}")
            lines += [f"{i}. {h['title']} | {h['url']} | {h['quick_summary']}"
                      for i, h in enumerate(entry["web_page_info_list"], 1)]
        else:
            lines = [f"page: {entry['url']}"] if echo else []
            lines.append(f"error: {entry['error']}" if "error" in entry else entry["information"])
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_observation(observation: list[dict[str, Any]], config: Config) -> str:
    """A raw observation of either tool as the policy reads it (``browse.observation_format``)."""
    browse = config.browse
    return _compact(observation, browse.observation_echo) if browse.observation_format == "compact" else _dumps(observation)


def page_notes(information: Any) -> str:
    """A browsed page's notes as text, in either protocol's shape: the native string, or the original
    DeepResearcher's list of ``{"page_number", "page_summary"}``."""
    if isinstance(information, list):
        return "\n".join(str(page.get("page_summary", "")) for page in information if isinstance(page, dict))
    return "" if information is None else str(information)


def _string_list(arguments: dict[str, Any], key: str, tool: str) -> list[str] | str:
    """The list of non-empty strings under ``key``, or an error message for the policy."""
    value = arguments.get(key)
    if value is None:
        return f'{tool} needs the argument "{key}": a list of strings, e.g. {{"{key}": ["..."]}}.'
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f'{tool} argument "{key}" must be a list of strings, got {type(value).__name__}.'
    cleaned = [v.strip() for v in value if v.strip()]
    if not cleaned:
        return f'{tool} argument "{key}" is empty; give at least one non-empty string.'
    return cleaned


class ToolBox:
    """Executes tool calls for rollouts against one environment."""

    def __init__(self, env: Environment, config: Config) -> None:
        self.env, self.config = env, config

    async def call(self, name: str, arguments: Any, context: ToolContext) -> ToolOutcome:
        """Run one call; always returns an observation."""
        started = time.perf_counter()
        if name not in TOOL_NAMES:
            outcome = self._error(f"Unknown tool {name!r}; available tools: {', '.join(TOOL_NAMES)}.")
        elif not isinstance(arguments, dict):
            outcome = self._error(f"{name} arguments must be a JSON object, got {type(arguments).__name__}.")
        elif name == "web_search":
            outcome = await self._search(arguments, context)
        else:
            outcome = await self._browse(arguments, context)
        outcome.seconds = time.perf_counter() - started
        return outcome

    @staticmethod
    def _error(message: str) -> ToolOutcome:
        return ToolOutcome(text=_dumps({"error": message}), error=message)

    async def _search(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        queries = _string_list(arguments, "query", "web_search")
        if isinstance(queries, str):
            return self._error(queries)
        queries = queries[: self.config.search.max_queries]
        try:
            results = await self.env.search(queries, self.config.search.top_k)
        except Exception as exc:  # a broken environment is an observation, never a crashed batch
            logger.warning("web_search failed: %s", exc)
            return self._error(f"web_search failed: {exc}")
        context.queries.extend(queries)
        observation = []
        for result in results:
            entry: dict[str, Any] = {"search_query": result.query}
            if result.error:
                entry["error"] = result.error
            entry["web_page_info_list"] = [
                {"title": h.title, "url": h.url, "quick_summary": h.snippet} for h in result.hits]
            context.searched_urls.update(h.url for h in result.hits)
            observation.append(entry)
        return ToolOutcome(text=self._render(observation), raw=observation)

    def _render(self, observation: list[dict[str, Any]]) -> str:
        return render_observation(observation, self.config)

    async def _browse(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        urls = _string_list(arguments, "url_list", "browse_webpage")
        if isinstance(urls, str):
            return self._error(urls)
        urls = list(dict.fromkeys(urls))[: self.config.browse.max_urls]
        refused = []
        if self.config.browse.only_searched_urls:
            refused = [u for u in urls if u not in context.searched_urls]
            urls = [u for u in urls if u in context.searched_urls]
        try:
            results = await self.env.browse(context.question, urls, notes=list(context.notes),
                                            queries=context.queries[-3:]) if urls else []
        except Exception as exc:
            logger.warning("browse_webpage failed: %s", exc)
            return self._error(f"browse_webpage failed: {exc}")
        observation = []
        for result in results:
            if result.error:
                observation.append({"url": result.url, "error": result.error})
                continue
            texts = [n.text for n in result.notes]
            context.notes.extend(texts)
            observation.append({"url": result.url, "information": "\n".join(texts) if texts else
                                "No new information relevant to the question on this page."})
        observation += [{"url": u, "error": "only URLs returned by web_search may be browsed"} for u in refused]
        return ToolOutcome(text=self._render(observation), raw=observation)
