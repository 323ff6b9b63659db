"""The original DeepResearcher agent's protocol, byte for byte: system prompt, tool schemas, turn parsing
and observation rendering, so the published checkpoints (``GAIR/DeepResearcher-7b``) meet what they were
trained on.

Source: github.com/GAIR-NLP/DeepResearcher, commit c93be8fd8637c1ac4a438ce730d118afd308f832, Apache
License 2.0 (Copyright the DeepResearcher authors). The strings ``SYSTEM_PROMPT`` and the schemas ``TOOLS``
are the ``online_search`` ones of ``scrl/llm_agent/generation.py`` (its prompt dates itself with
``strftime("%Y-%m-%d", gmtime())``); the parsing rules restate ``LLMGenerationManager.parse_response``;
the observation shapes are those of ``scrl/handler/handler.py`` (``handle_single_query``) after the
handler service's Flask ``jsonify``, which sorts keys; ``TOOLS_FOR_WIKI`` and ``RAG_SYSTEM_PROMPT`` are the
``search_engine == "rag"`` ones of ``generation.py``; the context of each turn restates ``run_llm_loop``
(``assistant_message``, ``think_of``) and the loss mask restates ``process_response_mask`` of
``verl/workers/actor/dp_actor.py`` (``trained_mask``). This module is the only place these constants live;
``tests/agent/test_protocol_golden.py`` checks them against the original's files and recorded turns.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from deepresearcher.agent.parsing import ParsedTurn

_WEB_TOOLS_LINES = (
    "I will provide you with two tools to help you answer the question:\n"
    "* A web search tool to help you perform google search. \n"
    "* A webpage browsing tool to help you get new page content.\n"
)
_RAG_TOOLS_LINES = (
    "I will provide you with one tool to help you answer the question:\n"
    "* A web search tool to help you perform search.\n"
)

# Trailing spaces on two lines and the final newline are the original's; keep them.
_PROMPT = (
    "## Background information \n"
    "* Today is {today}\n"
    "* You are Deep AI Research Assistant\n"
    "\n"
    "The question I give you is a complex question that requires a *deep research* to answer.\n"
    "\n"
    "{tools}"
    "\n"
    "You don't have to answer the question now, but you should first think about the research plan or what "
    "to search next.\n"
    "\n"
    "Your output format should be one of the following two formats:\n"
    "\n"
    "<think>\n"
    "YOUR THINKING PROCESS\n"
    "</think>\n"
    "<answer>\n"
    "YOUR ANSWER AFTER GETTING ENOUGH INFORMATION\n"
    "</answer>\n"
    "\n"
    "or\n"
    "\n"
    "<think>\n"
    "YOUR THINKING PROCESS\n"
    "</think>\n"
    "<tool_call>\n"
    "YOUR TOOL CALL WITH CORRECT FORMAT\n"
    "</tool_call>\n"
    "\n"
    "You should always follow the above two formats strictly.\n"
    "Only output the final answer (in words, numbers or phrase) inside the <answer></answer> tag, without any "
    "explanations or extra information. If this is a yes-or-no question, you should only answer yes or no.\n"
)
SYSTEM_PROMPT = _PROMPT.replace("{tools}", _WEB_TOOLS_LINES)
"""The ``online_search`` system turn (``{today}`` still to fill)."""
RAG_SYSTEM_PROMPT = _PROMPT.replace("{tools}", _RAG_TOOLS_LINES)
"""The ``rag`` system turn (``{today}`` still to fill): one tool, search without "google"."""

# Key order matters: the chat template renders each schema with ``tojson`` as it is.
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web for relevant information from google. You should use this tool if the "
            "historical page content is not enough to answer the question. Or last search result is not relevant "
            "to the question.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "array",
                        "items": {"type": "string", "description": "The query to search, which helps answer the question"},
                        "description": "The queries to search",
                    }
                },
                "required": ["query"],
                "minItems": 1,
                "uniqueItems": True,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "browse_webpage",
            "description": "Browse the webpage and return the content that not appeared in the conversation "
            "history. You should use this tool if the last action is search and the search result maybe relevant "
            "to the question.",
            "parameters": {
                "type": "object",
                "properties": {
                    "url_list": {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "description": "The chosen url from the search result, do not use url that not appeared "
                            "in the search result",
                        },
                        "description": "The chosen urls from the search result.",
                    }
                },
                "required": ["url_list"],
            },
        },
    },
]

TOOLS_FOR_WIKI: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web for relevant information. You should use this tool if the historical page "
            "content is not enough to answer the question. Or last search result is not relevant to the question.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "array",
                        "items": {"type": "string", "description": "The query to search, which helps answer the question"},
                        "description": "The queries to search",
                    }
                },
                "required": ["query"],
                "minItems": 1,
                "uniqueItems": True,
            },
        },
    },
]
"""The ``rag`` variant's one tool. Its parser and handler were the same as ``online_search``'s, so a
``browse_webpage`` call the prompt never offered still ran."""

MAX_CALL_DEPTH = 64
"""A tool call nested deeper than this is malformed. The original accepted any depth Python's JSON decoder could
read (about 1,000); a call kept in a trajectory must stay within what JSON writers serialize (orjson stops at
254 levels), and no tool takes more than three."""

MAX_QUERIES = 3
"""Queries of one ``web_search`` call that run ("only perform first 3 search queries")."""

STOP: tuple[str, ...] = ()
"""No stop strings: the original sampled every turn to the end-of-turn token. What follows ``</tool_call>``
matters: an ``<answer>`` there makes it an answer turn, and an episode that ends on the turn is trained and
scored with all of it."""

END_OF_TEXT = "<|endoftext|>"
"""Qwen2.5's padding token, which the original deleted from every decoded turn and context
(``.replace("<|endoftext|>", "")``), wherever it stood."""

ASSISTANT_OPEN = "<|im_start|>assistant\n"
ASSISTANT_CLOSE = "<|im_end|>"
"""The original trainer's loss mask (``dp_actor.py``, ``process_response_mask``) trained every token from each
``ASSISTANT_OPEN`` up to and including the next ``ASSISTANT_CLOSE``."""


def _dated(prompt: str, today: dt.date | None) -> str:
    day = today or dt.datetime.now(dt.timezone.utc).date()
    return prompt.format(today=day.isoformat())


def system_prompt(today: dt.date | None = None) -> str:
    """The original's system turn, dated ``today`` (the UTC date by default, as its ``gmtime()``)."""
    return _dated(SYSTEM_PROMPT, today)


def rag_system_prompt(today: dt.date | None = None) -> str:
    """The original's ``rag`` system turn, dated as ``system_prompt``."""
    return _dated(RAG_SYSTEM_PROMPT, today)


def user_prompt(question: str) -> str:
    """The user turn is the question as the dataset gives it, unstripped."""
    return question


def _depth(value: Any) -> int:
    """How deeply lists and dicts nest in ``value`` (counted without recursion, so any depth is safe)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _between(text: str, start: str, end: str) -> str:
    """``text.split(start)[1].split(end)[0]``: after the first ``start``, up to the next ``start`` or ``end``."""
    return text.split(start)[1].split(end)[0]


def _failure(kind: Any, message: str) -> ParsedTurn:
    return ParsedTurn(error_kind=kind, error=message)


def parse_turn(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedTurn:
    """One sampled turn (the prefilled ``<think>`` not included), judged as the original's ``parse_response``.

    ``tools`` is ignored: the original's rules name its two tools themselves.

    Any ``<answer>`` makes it an answer turn, which needs ``</think>`` and ``</answer>``; else any
    ``<tool_call>`` makes it a call, which needs ``</tool_call>`` and ``</think>`` and a JSON object whose
    ``name`` is a tool and whose ``arguments`` hold a ``query`` list (``web_search``) or a non-empty
    ``url_list`` list (``browse_webpage``); other arguments pass. Every failure ends the episode there.
    """
    content = "<think>" + text
    if "<answer>" in content:
        if "</think>" not in content or "</answer>" not in content:
            return _failure("unclosed_answer", "An answer turn needs both </think> and </answer>.")
        return ParsedTurn(answer=_between(content, "<answer>", "</answer>").strip())
    if "<tool_call>" not in content:
        return _failure("no_action", "The turn has neither <answer> nor <tool_call>.")
    if "</tool_call>" not in content or "</think>" not in content:
        return _failure("unclosed_tool_call", "A tool-call turn needs both </think> and </tool_call>.")
    try:
        call = json.loads(_between(content, "<tool_call>", "</tool_call>"))
    except json.JSONDecodeError as exc:
        return _failure("bad_json", f"The tool call is not JSON ({exc.msg}).")
    except RecursionError:  # the original caught every exception here; deep nesting is the one json raises
        return _failure("bad_json", "The tool call nests too deeply to be read.")
    if _depth(call) > MAX_CALL_DEPTH:
        return _failure("bad_json", f"The tool call nests deeper than {MAX_CALL_DEPTH} levels.")
    if not isinstance(call, dict) or "name" not in call or "arguments" not in call:
        return _failure("missing_name", 'The tool call needs "name" and "arguments".')
    name, arguments = call["name"], call["arguments"]
    if name not in ("web_search", "browse_webpage"):
        return _failure("unknown_tool", f"There is no tool named {name!r}.")
    key = "query" if name == "web_search" else "url_list"
    if not isinstance(arguments, dict) or not isinstance(arguments.get(key), list):
        return _failure("bad_arguments", f'{name} needs "{key}" as a list.')
    if name == "browse_webpage" and not arguments[key]:
        return _failure("bad_arguments", "url_list must hold at least one URL.")
    return ParsedTurn(tool_name=name, arguments=arguments)


def jsonify_order(value: Any) -> Any:
    """``value`` as it came back through the handler service's Flask ``jsonify``: every dict's keys sorted.

    Both the observation and the tool call itself made that trip before the trainer put them in its message
    list (the recorded turns hold ``{"arguments": …, "name": …}``), so the re-rendered call lists its
    arguments in sorted order whatever order the policy wrote them in.
    """
    if isinstance(value, dict):
        return {key: jsonify_order(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [jsonify_order(item) for item in value]
    return value


def render_observation(content: list[dict[str, Any]]) -> str:
    """A tool result as the original's policy read it: Python ``str()`` of the key-sorted JSON.

    The handler service answered through Flask's ``jsonify`` (keys sorted), the trainer put the decoded list
    itself in the ``tool`` message, and the chat template printed it with ``str()``, quotes and all.
    """
    return str(jsonify_order(content))


def think_of(text: str) -> str:
    """The thinking of a sampled turn as the original cut it: after the first ``<think>`` (the prefilled one,
    so the turn's own text up to any ``<think>`` it wrote) and before the first ``</think>``."""
    return _between("<think>" + text, "<think>", "</think>")


def assistant_message(text: str, parsed: ParsedTurn, *, template_renders_tools: bool = True) -> dict[str, Any]:
    """A tool-call turn as the original put it back in the conversation: its thinking and the call, nothing else
    (Qwen2.5's chat template then writes ``<think>…</think>``, a newline and ``<tool_call>`` with spaced JSON).

    A template that does not render tool calls (plain ChatML) gets the call written as Qwen2.5's would be, in the
    content: the same text, so small CPU models can run this protocol too.
    """
    call = {"name": parsed.tool_name, "arguments": jsonify_order(parsed.arguments)}
    content = "<think>" + think_of(text) + "</think>"
    if not template_renders_tools:
        arguments = json.dumps(call["arguments"], ensure_ascii=False)
        return {"role": "assistant",
                "content": f'{content}\n<tool_call>\n{{"name": "{call["name"]}", "arguments": {arguments}}}\n</tool_call>'}
    return {"role": "assistant", "content": content, "tool_calls": [{"type": "function", "function": call}]}


def trained_mask(response_ids: list[int], open_ids: list[int], close_ids: list[int], pad_id: int | None) -> list[int]:
    """1 on the response tokens the original trainer trained, 0 elsewhere.

    The response is read as if it followed ``open_ids`` (the ids of ``ASSISTANT_OPEN``: the prompt ends with
    it). Each opening starts a trained span that runs to the next ``close_ids`` inclusive; an opening never
    closed trains to the end, less trailing ``pad_id`` tokens. After a close the search for the next opening
    skips ``len(close_ids)`` more tokens (the newline that follows a close), as the original did.
    """
    tokens = [*open_ids, *response_ids]
    offset, mask = len(open_ids), [0] * len(response_ids)
    position = 0
    while True:
        start = _find(tokens, open_ids, position)
        if start < 0:
            return mask
        start += len(open_ids)
        end = _find(tokens, close_ids, start)
        if end < 0:
            end = len(tokens)
            while end > start and tokens[end - 1] == pad_id:
                end -= 1
            mask[start - offset : end - offset] = [1] * (end - start)
            return mask
        end += len(close_ids)
        mask[start - offset : end - offset] = [1] * (end - start)
        position = end + len(close_ids)


def _find(tokens: list[int], pattern: list[int], start: int) -> int:
    """Where ``pattern`` first occurs in ``tokens`` at or after ``start``; -1 if nowhere."""
    for i in range(start, len(tokens) - len(pattern) + 1):
        if tokens[i : i + len(pattern)] == pattern:
            return i
    return -1
