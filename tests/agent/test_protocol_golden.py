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


def _reference_constants(today: dt.date) -> tuple[list[dict[str, Any]], str]:
    """The original's ``TOOLS`` and its ``online_search`` system prompt (dated ``today``), parsed from its source."""
    tree = ast.parse((REFERENCE / "scrl/llm_agent/generation.py").read_text(encoding="utf-8"))
    tools = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "TOOLS")
    prompts = ["".join(part.value if isinstance(part, ast.Constant) else today.isoformat() for part in node.values)
               for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) and "Background information" in
               "".join(p.value for p in node.values if isinstance(p, ast.Constant))]
    (online,) = [p for p in prompts if "two tools" in p]
    return tools, online


def _recorded(name: str) -> dict[str, Any]:
    (turn,) = json.loads((REFERENCE / "signal" / name).read_text(encoding="utf-8"))
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


@pytest.mark.parametrize("eos", [False, True], ids=["stopped-at-tool_call", "sampled-im_end"])
def test_recorded_tool_turns_rebuild_to_the_same_token_ids(qwen_tokenizer, eos: bool) -> None:
    """The recorded search and read turns, through our engine, toolbox and template, give exactly the token ids the
    original fed its policy for the next turn (its whole conversation rendered by the Qwen2.5 template)."""
    search, read = _recorded("data_search.json"), _recorded("data_read.json")
    tools, prompt = _reference_constants(TODAY)
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": search["question"]}]
    for turn in (search, read):
        messages.append({"role": "assistant", "content": "<think>" + turn["think"] + "</think>",
                         "tool_calls": [{"type": "function", "function": turn["tool_call"]}]})
        messages.append({"role": "tool", "name": turn["tool_call"]["name"], "content": turn["content"]})
    text = qwen_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tools=tools, tokenize=False)
    expected = qwen_tokenizer(text + "<think>")["input_ids"]

    protocol = get_protocol("deepresearcher")
    config = load_config(overrides=["agent.protocol=deepresearcher"])
    template = ChatTemplate(qwen_tokenizer, protocol, today=TODAY)
    close = "<|im_end|>" if eos else ""
    turns = [_canonical_turn(search) + close, _canonical_turn(read) + close, " Done. </think>\n<answer>suicide</answer>"]
    generator = ScriptedGenerator(qwen_tokenizer, turns, eos=not eos)
    toolbox = protocol.make_toolbox(ReplayEnvironment(search, read), config)
    (trajectory,) = asyncio.run(run_rollouts([search["question"]], generator, toolbox, qwen_tokenizer, config.agent,
                                             template=template))
    generator.assert_consumed()
    assert trajectory.termination == "answer" and trajectory.answer == "suicide"
    assert [t.tool_call.text for t in trajectory.turns[:2]] == [str(search["content"]), str(read["content"])]
    seen = [i for segment in trajectory.segments[:5] for i in segment.token_ids]
    assert [s.source for s in trajectory.segments] == ["prompt", "policy", "env", "policy", "env", "policy"]
    assert seen == expected
