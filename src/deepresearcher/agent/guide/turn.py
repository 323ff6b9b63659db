"""One guided turn: the native protocol's turn written around what the model chooses.

The guide writes the protocol's fixed text itself (the tags, the JSON of a call, the first words of a thought)
and the model writes what is its to choose, each part under a token constraint (``constraints``)::

    <think>\\nI need to find THOUGHT\\n</think>\\n<tool_call>\\n{"name": "web_search", "arguments": {"query": ["QUERY"]}}\\n</tool_call>
    <think>\\nTo answer "QUESTION", I will read the page about TITLE\\n</think>\\n<tool_call>\\n{"name": "browse_webpage", "arguments": {"url_list": ["URL"]}}\\n</tool_call>
    <think>\\nSENTENCE\\n</think>\\n<answer>\\nANSWER\\n</answer>

THOUGHT is free text on one line; QUERY is a span of the question (the worked example searches for the
question); TITLE is the title of one of the last search's results not yet read, picked by the model, and URL is
that result's; SENTENCE and ANSWER come from the model reading the pages in a prompt of their own
(``reading``): ANSWER is text the pages hold (or yes/no), never the question's words or the model's memory.
Which action a turn takes follows the episode so far (``next_action``): search until a search succeeds, then
read one of its results (another while reads fail), then answer; so every guided episode searches before it
answers, and answers one-hop questions (the guide does not chain searches).

The turn is one ``GenerationResult``: the sampled and the written ids in order (what the next turn reads), the
sampled ones with their logprobs under the constraint and the written ones with 0 (the guided policy writes
them with probability 1). A guided turn is not the model's own sampling: it is for running and evaluating a
model that was not trained on the protocol, never for training (``agent.guide``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from deepresearcher.agent.guide.constraints import Choice, CopySpan, FreeText, Vocabulary
from deepresearcher.agent.guide.reading import Reader
from deepresearcher.agent.tools import page_notes
from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory
from deepresearcher.generate.base import GenerationResult, Generator, SamplingParams

Action = Literal["search", "browse", "answer"]

THINK_TOKENS = 32
"""Most tokens the model adds to a thought (one line); a small model's thoughts run on."""
QUERY_TOKENS = 48
"""Most tokens of a search query."""
OPENERS: dict[str, str] = {"search": "I need to find", "browse": 'To answer "{question}", I will read the page about'}
"""The first words of a tool call's thought, written by the guide: they say what the turn is for, as the worked
example's thoughts do, and the model completes them. The browse opener repeats the question: a small model copies
what it read last, and without it picks the last search results' titles over the question's subject."""
_CONTROL = "".join(map(chr, range(32)))
_CALL_TAIL = '"]}}\n</tool_call>'


def _calls(trajectory: Trajectory) -> list[ToolCallRecord]:
    """The episode's tool calls that ran without an error."""
    return [turn.tool_call for turn in trajectory.turns if turn.tool_call is not None and not turn.tool_call.error]


def _entries(call: ToolCallRecord) -> list[dict[str, Any]]:
    return [e for e in call.observation if isinstance(e, dict)] if isinstance(call.observation, list) else []


def _notes(call: ToolCallRecord) -> list[str]:
    """The notes of the pages a browse call read."""
    if call.name != "browse_webpage":
        return []
    return [page_notes(e["information"]) for e in _entries(call) if "information" in e]


def next_action(trajectory: Trajectory, final: bool) -> Action:
    """What this turn does: search until a search succeeds (never an answer before one), then read one of its
    results (another one while reads fail), then answer; the ``final`` turn answers once a search succeeded."""
    calls = _calls(trajectory)
    searches = [i for i, call in enumerate(calls) if call.name == "web_search" and _entries(call)]
    if not searches:
        return "search"
    read = any(_notes(call) for call in calls[searches[-1]:])
    return "answer" if final or read or not unread_results(trajectory) else "browse"


def unread_results(trajectory: Trajectory) -> dict[str, str]:
    """The last successful search's results (URL: title) that no browse of this episode asked for, in order."""
    calls = _calls(trajectory)
    searches = [call for call in calls if call.name == "web_search" and _entries(call)]
    if not searches:
        return {}
    asked = {url for call in calls if call.name == "browse_webpage" for url in call.arguments.get("url_list", [])}
    hits = [hit for entry in _entries(searches[-1]) for hit in entry.get("web_page_info_list", [])]
    results: dict[str, str] = {}
    for hit in hits:
        url = hit.get("url")
        if isinstance(url, str) and url and url not in asked:
            results.setdefault(url, " ".join(str(hit.get("title") or url).split()))
    return results


def answer_sources(trajectory: Trajectory) -> list[str]:
    """What the answer is read from: the notes of every page read, else the search results' snippets."""
    calls = _calls(trajectory)
    notes = [text for call in calls for text in _notes(call) if text.strip()]
    if notes:
        return notes
    return [hit["quick_summary"] for call in calls if call.name == "web_search" for entry in _entries(call)
            for hit in entry.get("web_page_info_list", []) if str(hit.get("quick_summary", "")).strip()]


def _call_head(name: str, argument: str) -> str:
    """The call's JSON up to the opening quote of its one argument's first value."""
    head = json.dumps({"name": name, "arguments": {argument: ["@"]}})
    return "<tool_call>\n" + head[: head.index("@")]


class _TurnWriter:
    """Accumulates one turn's ids: text the guide writes, and parts the model samples under a constraint."""

    def __init__(self, generator: Generator, vocab: Vocabulary, encode: Any, context: list[int],
                 params: SamplingParams) -> None:
        self.generator, self.vocab, self.encode = generator, vocab, encode
        self.context, self.params = context, params
        self.ids: list[int] = []
        self.logprobs: list[float] = []

    @property
    def room(self) -> int:
        return self.params.max_tokens - len(self.ids)

    def write(self, text: str) -> bool:
        """Append ``text`` as the guide's own; False (keeping as much as fits) when the turn's token limit is hit."""
        ids = self.encode(text)
        fits = ids[: self.room]
        self.ids += fits
        self.logprobs += [0.0] * len(fits)
        return len(fits) == len(ids)

    async def sample(self, constraint: Any, stop: str, max_tokens: int) -> bool:
        """Let the model write one part, ending with ``stop`` (kept); a part cut by its own ``max_tokens`` gets
        ``stop`` written after it. False when the turn's token limit ended it."""
        limit = min(max_tokens, self.room)
        if limit < 1:
            return False
        params = self.params.model_copy(update={"max_tokens": limit, "stop": [stop], "constraint": constraint})
        result = await self.generator.generate(self.context + self.ids, params)
        self.ids += result.token_ids
        self.logprobs += result.logprobs if result.logprobs is not None else [0.0] * len(result.token_ids)
        if self.vocab.text(result.token_ids).endswith(stop):
            return True
        return result.finish_reason == "length" and limit == max_tokens and self.write(stop)

    def result(self, complete: bool, stop: str) -> GenerationResult:
        return GenerationResult(token_ids=self.ids, logprobs=self.logprobs,
                                finish_reason="stop" if complete else "length", stop_reason=stop if complete else None,
                                text=self.vocab.text(self.ids))


class Guide:
    """Writes the turns of a model that was not trained on the native protocol (``agent.guide``); see the module."""

    def __init__(self, tokenizer: Any) -> None:
        self.vocab = Vocabulary(tokenizer)
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self.encode = (lambda text: backend.encode(text, add_special_tokens=False).ids) if backend is not None else (
            lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"]))
        self.reader = Reader(tokenizer, self.vocab, self.encode)
        self._thought = FreeText(self.vocab, banned="<>" + _CONTROL.replace("\n", ""), end="\n")

    async def turn(self, generator: Generator, context: list[int], params: SamplingParams, trajectory: Trajectory,
                   *, final: bool) -> GenerationResult:
        """Write the next turn of ``trajectory`` (whose context is ``context``) with ``generator``; ``final``:
        the episode's last turn."""
        out = _TurnWriter(generator, self.vocab, self.encode, context, params)
        action = next_action(trajectory, final)
        if action == "answer":
            sentence, answer = await self.reader.answer(generator, trajectory.question, answer_sources(trajectory),
                                                        params)
            complete = out.write(f"\n{sentence}\n</think>\n<answer>\n{answer}\n</answer>")
            return out.result(complete, "</answer>")
        if action == "browse":
            return await self._browse(out, unread_results(trajectory), OPENERS["browse"].format(
                question=" ".join(trajectory.question.split())))
        query = CopySpan(self.vocab, [trajectory.question.replace('"', " ").replace("\\", " ")], end='"')
        complete = (out.write("\n" + OPENERS["search"]) and await out.sample(self._thought, "\n", THINK_TOKENS)
                    and out.write("</think>\n" + _call_head("web_search", "query"))
                    and await out.sample(query, '"', QUERY_TOKENS) and out.write(_CALL_TAIL[1:]))
        return out.result(complete, "</tool_call>")

    async def _browse(self, out: _TurnWriter, results: dict[str, str], opener: str) -> GenerationResult:
        """The model picks the page to read by its title, right after the guide's opener; the call is written."""
        by_title = {f" {title}\n": url for url, title in reversed(results.items())}  # the first of a title wins
        titles = Choice(self.vocab, self.encode, list(by_title))
        if not (out.write("\n" + opener)
                and await out.sample(titles, "\n", max(len(self.encode(t)) for t in titles.options))):
            return out.result(False, "")
        url = by_title.get(self.vocab.text(out.ids)[len("\n" + opener):], next(iter(results)))
        complete = out.write("</think>\n" + _call_head("browse_webpage", "url_list") + url + _CALL_TAIL)
        return out.result(complete, "</tool_call>")

