"""``agent.protocol: deepresearcher`` against the original DeepResearcher's own files.

The expected side is read from the original's code and recorded tool turns in
``../shared/reference/deepresearcher/`` (Apache-2.0; see its PROVENANCE.md): its prompt and tool schemas are
taken from ``scrl/llm_agent/generation.py`` by parsing it, and its conversations are rendered as its
``run_llm_loop`` did, through the Qwen2.5 chat template, whole. Our side runs the real rollout engine, template
and toolbox over an environment that replays the recorded search hits and page readings.
"""

from __future__ import annotations

import ast
import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from deepresearcher.agent.loop import run_rollouts
from deepresearcher.agent.protocols import deepresearcher as original
from deepresearcher.agent.protocols import get_protocol
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.config import load_config
from deepresearcher.generate.scripted import ScriptedGenerator
from deepresearcher.web.types import BrowseResult, Note, QueryResult, SearchHit

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "deepresearcher"
pytestmark = pytest.mark.skipif(not REFERENCE.is_dir(), reason="../shared/reference/deepresearcher is not here")
TODAY = dt.date(2025, 4, 3)


def _reference_constants(today: dt.date, rag: bool = False) -> tuple[list[dict[str, Any]], str]:
    """The original's ``TOOLS`` and ``online_search`` system prompt (dated ``today``), or with ``rag`` its
    ``TOOLS_FOR_WIKI`` and ``rag`` prompt, parsed from its source."""
    tree = ast.parse((REFERENCE / "scrl/llm_agent/generation.py").read_text(encoding="utf-8"))
    name = "TOOLS_FOR_WIKI" if rag else "TOOLS"
    tools = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name)
    prompts = ["".join(part.value if isinstance(part, ast.Constant) else today.isoformat() for part in node.values)
               for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) and "Background information" in
               "".join(p.value for p in node.values if isinstance(p, ast.Constant))]
    (prompt,) = [p for p in prompts if ("one tool" if rag else "two tools") in p]
    return tools, prompt


@pytest.fixture(scope="module")
def original_code(reference_method) -> tuple[Any, Any]:
    """The original's ``parse_response`` and ``process_response_mask``, each compiled alone from its file."""
    return (reference_method("scrl/llm_agent/generation.py", "LLMGenerationManager", "parse_response", json=json),
            reference_method("verl/workers/actor/dp_actor.py", "DataParallelPPOActor", "process_response_mask"))


def _recorded(name: str) -> dict[str, Any]:
    """A recorded tool turn of the original; empty when the reference is absent (the module's tests skip then)."""
    path = REFERENCE / "signal" / name
    if not path.is_file():
        return {}
    (turn,) = json.loads(path.read_text(encoding="utf-8"))
    return turn


def _canonical_turn(turn: dict[str, Any]) -> str:
    """The turn as the original re-rendered it, written by the policy: think, then the call in Qwen's format."""
    call = {"name": turn["tool_call"]["name"], "arguments": turn["tool_call"]["arguments"]}
    return f"{turn['think']}</think>\n<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"


class ReplayEnvironment:
    """Answers with the recorded search hits and page readings, and checks it was asked what the original asked."""

    def __init__(self, search: dict[str, Any], read: dict[str, Any]) -> None:
        self.search_turn, self.read_turn = search, read
        recorded = read["content"]
        wanted = {page["url"] for page in recorded}
        hits = [(entry["search_query"], hit["url"]) for entry in search["content"]
                for hit in entry["web_page_info_list"] if hit["url"] in wanted]
        assert [url for _, url in hits] == [page["url"] for page in recorded], "the recording reads hits in order"
        self.pages_of: dict[str, list[dict[str, Any]]] = {}
        for (query, _), page in zip(hits, recorded):
            self.pages_of.setdefault(query, []).append(page)

    async def search(self, queries: list[str], top_k: int | None = None) -> list[QueryResult]:
        assert queries == self.search_turn["tool_call"]["arguments"]["query"][:3]
        return [QueryResult(query=entry["search_query"], hits=[
            SearchHit(title=h["title"], url=h["url"], snippet=h["quick_summary"]) for h in entry["web_page_info_list"]])
            for entry in self.search_turn["content"]]

    async def browse(self, question: str, urls: list[str], notes: list[str] | None = None,
                     queries: list[str] | None = None) -> list[BrowseResult]:
        (query,) = queries  # each hit is read for the query that found it, as the original's reader did
        recorded = self.pages_of[query]
        assert urls == [page["url"] for page in recorded], "the query's hits read in result order, repeats kept"
        return [BrowseResult(url=page["url"], notes=[Note(url=page["url"], text=i["page_summary"], chunk=i["page_number"])
                                                     for i in page["information"]]) for page in recorded]

    async def aclose(self) -> None:
        return None


def test_prompt_and_tools_are_the_originals() -> None:
    """Our constants are the original's, byte for byte: trailing spaces, final newline and schema key order."""
    tools, prompt = _reference_constants(TODAY)
    assert original.system_prompt(TODAY) == prompt
    assert prompt.endswith("or no.\n") and "## Background information \n" in prompt
    assert json.dumps(original.TOOLS) == json.dumps(tools)


def test_rag_prompt_and_tool_are_the_originals() -> None:
    """``deepresearcher-rag`` shows the original's ``search_engine == "rag"`` prompt and its one tool, byte for byte."""
    tools, prompt = _reference_constants(TODAY, rag=True)
    protocol = get_protocol("deepresearcher-rag")
    assert protocol.system_prompt(TODAY) == prompt and "one tool" in prompt and "google" not in prompt
    assert json.dumps(protocol.tools) == json.dumps(tools) == json.dumps(original.TOOLS_FOR_WIKI)
    assert protocol.parse_turn is original.parse_turn, "the original parsed rag turns with the same rules"


END_OF_TEXT = "<|endoftext|>"


class OriginalEpisode:
    """One episode as the original's ``run_llm_loop`` built it, on the same sampled ids: its own ``parse_response``
    and ``process_response_mask`` (compiled from its files), its message list, chat-template rendering and
    tokenization restated from ``generation.py``. Tool results pass through the handler service's ``jsonify``
    (keys sorted) as they did."""

    def __init__(self, code: tuple[Any, Any], tokenizer: Any, tools: list[dict[str, Any]], system: str,
                 question: str) -> None:
        self.tokenizer, self.tools = tokenizer, tools
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        self.contexts: list[list[int]] = []
        self.message_string: str | None = None
        self._parse, self._mask = code

    def _render(self, messages: list[dict[str, Any]]) -> str:
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tools=self.tools, tokenize=False)

    def context(self) -> list[int]:
        ids = self.tokenizer(self._render(self.messages) + "<think>")["input_ids"]
        self.contexts.append(ids)
        return ids

    def turn(self, context: list[int], response: list[int], content: list[Any] | None) -> bool:
        """One sampled turn and the handler's answer to it (if it was a call); False once the episode stopped."""
        decoder = type("Decoder", (), {"batch_decode": lambda _, rows: [self.tokenizer.decode(r) for r in rows]})()
        (stop, think, call), = self._parse(type("Manager", (), {"tokenizer": decoder})(), [response], think=True)
        if stop:
            self.message_string = (self.tokenizer.decode(context).replace(END_OF_TEXT, "")
                                   + self.tokenizer.decode(response).replace(END_OF_TEXT, ""))
            return False
        call = json.loads(json.dumps(call, sort_keys=True))
        self.messages.append({"role": "assistant", "content": "<think>" + think + "</think>",
                              "tool_calls": [{"type": "function", "function": call}]})
        self.messages.append({"role": "tool", "name": call["name"],
                              "content": json.loads(json.dumps(content, sort_keys=True))})
        return True

    def trained(self) -> tuple[list[int], list[int], list[int], str]:
        """Prompt ids, response ids, the trainer's mask over them, and the response text."""
        import torch

        message_string = self.message_string if self.message_string is not None else self._render(self.messages)
        initial = self._render(self.messages[:2])
        response = message_string[len(initial):]
        prompt_ids = self.tokenizer(initial)["input_ids"]
        response_ids = self.tokenizer(response)["input_ids"]
        responses = torch.tensor([response_ids])
        mask = self._mask(None, responses, torch.ones_like(responses), self.tokenizer)
        return prompt_ids, response_ids, mask[0].tolist(), response


class Recording:
    """A scripted policy that remembers each context it was given and each reply it sampled."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.inner = ScriptedGenerator(tokenizer, replies)
        self.exact_tokens = True
        self.contexts: list[list[int]] = []
        self.sampled: list[list[int]] = []

    async def generate(self, prompt_ids: list[int], params: Any) -> Any:
        result = await self.inner.generate(prompt_ids, params)
        self.contexts.append(list(prompt_ids))
        self.sampled.append(list(result.token_ids))
        return result

    async def aclose(self) -> None:
        return None


SEARCH, READ = _recorded("data_search.json"), _recorded("data_read.json")


def _shaped(turn: dict[str, Any], shape: str) -> str:
    """A recorded call written by the policy in one of the shapes models write (the turn after ``<think>``)."""
    name, arguments, think = turn["tool_call"]["name"], turn["tool_call"]["arguments"], turn["think"]
    call = {"name": name, "arguments": arguments}
    body = {
        "canonical": json.dumps(call, ensure_ascii=False),
        "compact": json.dumps(call, separators=(",", ":")),
        "arguments-first": json.dumps({"arguments": arguments, "name": name}),
        "blank-line": json.dumps(call),
        "url_list-first": json.dumps({"name": name, "arguments": dict(reversed(list(arguments.items())))}),
        "whitespace": json.dumps(call, indent=2).replace(": ", " :  "),
    }[shape]
    gap = "\n\n" if shape == "blank-line" else "\n"
    pad = "  " if shape == "whitespace" else ""
    return f"{think}</think>{gap}<tool_call>\n{pad}{body}{pad}\n</tool_call>"


def _ours(tokenizer: Any, replies: list[str], protocol_name: str = "deepresearcher", max_turns: int = 10):
    protocol = get_protocol(protocol_name)
    config = load_config(overrides=[f"agent.protocol={protocol_name}", f"agent.max_turns={max_turns}"])
    generator = Recording(tokenizer, replies)
    toolbox = protocol.make_toolbox(ReplayEnvironment(SEARCH, READ), config)
    (trajectory,) = asyncio.run(run_rollouts([SEARCH["question"]], generator, toolbox, tokenizer, config.agent,
                                             template=ChatTemplate(tokenizer, protocol, today=TODAY)))
    generator.inner.assert_consumed()
    return trajectory, generator


def _theirs(code: tuple[Any, Any], tokenizer: Any, generator: Recording, rag: bool = False) -> OriginalEpisode:
    tools, prompt = _reference_constants(TODAY, rag=rag)
    episode = OriginalEpisode(code, tokenizer, tools, prompt, SEARCH["question"])
    for sampled, content in zip(generator.sampled, [SEARCH["content"], READ["content"], None], strict=False):
        if not episode.turn(episode.context(), sampled, content):
            break
    return episode


def _assert_same(trajectory: Any, generator: Recording, episode: OriginalEpisode) -> None:
    assert generator.contexts == episode.contexts[: len(generator.contexts)], "each turn read what the original's did"
    prompt_ids, response_ids, mask, response = episode.trained()
    assert trajectory.prompt_ids == prompt_ids
    assert trajectory.completion_ids == response_ids
    assert trajectory.completion_mask == mask
    assert trajectory.response_text == response


@pytest.mark.parametrize("shape", ["canonical", "compact", "arguments-first", "blank-line", "url_list-first",
                                   "whitespace"])
def test_each_turn_reads_the_originals_context_and_trains_its_tokens(original_code, qwen_tokenizer, shape: str) -> None:
    """The recorded search and read, written in each shape, then an answer: every turn's context, the trained ids,
    the trainer's mask and the scored text are the original's own (its parser, its mask function, its rendering
    of the conversation), whatever shape the policy wrote the calls in."""
    replies = [_shaped(SEARCH, shape), _shaped(READ, shape), " Done. </think>\n<answer>suicide</answer>"]
    trajectory, generator = _ours(qwen_tokenizer, replies)
    assert trajectory.termination == "answer" and trajectory.answer == "suicide"
    assert [t.tool_call.text for t in trajectory.turns[:2]] == [str(SEARCH["content"]), str(READ["content"])]
    episode = _theirs(original_code, qwen_tokenizer, generator)
    _assert_same(trajectory, generator, episode)
    rendered = qwen_tokenizer.decode(generator.contexts[2])
    sampled = qwen_tokenizer.decode(generator.sampled[1])  # the read call, with both arguments
    assert (sampled.removesuffix("<|im_end|>") in rendered) == (shape == "canonical"), "only that shape survives as written"
    assert [s.source for s in trajectory.segments] == ["prompt", "policy", "env", "policy", "env", "policy"]


def test_the_mask_trains_the_prefilled_think_and_each_closing_im_end(qwen_tokenizer) -> None:
    """Beyond the sampled tokens, the original trained each turn's prefilled ``<think>`` and the ``<|im_end|>`` that
    closes a tool-call turn: those tokens are in our mask too."""
    trajectory, _ = _ours(qwen_tokenizer, [_shaped(SEARCH, "canonical"), " ok </think>\n<answer>x</answer>"])
    trained = [qwen_tokenizer.decode(s.token_ids) for s in trajectory.segments if s.source == "policy"]
    assert all(text.startswith("<think>") and text.endswith("<|im_end|>") for text in trained)
    assert all(s.logprobs is None for s in trajectory.segments), "re-tokenized turns carry no sampling logprobs"


@pytest.mark.parametrize("ending", ["max_turns", "format_error"])
def test_episodes_that_end_without_an_answer_match_the_original(original_code, qwen_tokenizer, ending: str) -> None:
    """``max_turns``: the original still ran the last call and its text ends with that observation and an opened
    assistant turn; a malformed turn ends the episode with the turn as sampled."""
    if ending == "max_turns":
        replies, max_turns = [_shaped(SEARCH, "compact"), _shaped(READ, "compact")], 2
    else:
        replies, max_turns = [_shaped(SEARCH, "compact"), " thinking <tool_call>{\"name\": \"web_search\"}"], 10
    trajectory, generator = _ours(qwen_tokenizer, replies, max_turns=max_turns)
    assert trajectory.termination == ending
    episode = _theirs(original_code, qwen_tokenizer, generator)
    _assert_same(trajectory, generator, episode)
    if ending == "max_turns":
        assert trajectory.turns[-1].tool_call.text == str(READ["content"])
        assert trajectory.response_text.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_rag_episode_matches_the_originals_rag_context(original_code, qwen_tokenizer) -> None:
    """The rag variant's contexts are the original's with ``TOOLS_FOR_WIKI`` and its one-tool prompt."""
    trajectory, generator = _ours(qwen_tokenizer, [_shaped(SEARCH, "compact"), " ok </think>\n<answer>x</answer>"],
                                  protocol_name="deepresearcher-rag")
    assert trajectory.termination == "answer"
    _assert_same(trajectory, generator, _theirs(original_code, qwen_tokenizer, generator, rag=True))


def test_recorded_calls_came_back_key_sorted() -> None:
    """Why the re-rendered call lists its arguments sorted: the calls the original put back in its conversation came
    through its handler service's ``jsonify``, and the recorded ones hold ``arguments`` before ``name`` and
    ``query`` before ``url_list``, as no policy writes them but as sorting leaves them."""
    for turn in (SEARCH, READ):
        assert list(turn) == sorted(turn) and list(turn["tool_call"]) == ["arguments", "name"]
    assert list(READ["tool_call"]["arguments"]) == ["query", "url_list"]
