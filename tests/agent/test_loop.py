"""The rollout loop: every branch driven by a scripted policy, ending with its documented reason,
and the token-in/token-out contract checked on every trajectory."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from deepresearcher.agent.loop import RolloutTask, run_rollouts
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.agent.trajectory import Trajectory, load_trajectories, save_trajectories
from deepresearcher.config import AgentConfig
from deepresearcher.generate.base import GenerationResult, SamplingParams
from deepresearcher.generate.scripted import ScriptedGenerator

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "array", "items": {"type": "string"}}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "browse_webpage",
            "description": "Read pages.",
            "parameters": {
                "type": "object",
                "properties": {"url_list": {"type": "array", "items": {"type": "string"}}},
                "required": ["url_list"],
            },
        },
    },
]


@dataclass
class Outcome:
    text: str
    error: str | None = None
    raw: Any = None


@dataclass
class Context:
    question: str
    calls: list[str] = field(default_factory=list)


class EchoToolBox:
    """A tiny toolbox: answers each call with a line naming it; the query `explode` raises."""

    def __init__(self, observation_words: int = 3) -> None:
        self.observation_words = observation_words
        self.calls: list[tuple[str, dict]] = []

    async def call(self, name: str, arguments: dict, context: Context) -> Outcome:
        self.calls.append((name, arguments))
        context.calls.append(name)
        await asyncio.sleep(0)
        if arguments.get("query") == ["explode"]:
            raise RuntimeError("backend exploded")
        return Outcome(text=f"{name} result " + "word " * self.observation_words, raw={"name": name})


def call(name: str, arguments: dict) -> str:
    return f"reasoning</think>\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


SEARCH = call("web_search", {"query": ["capital of Freedonia"]})
BROWSE = call("browse_webpage", {"url_list": ["https://example.org/freedonia"]})
ANSWER = "found it</think>\n<answer>Fredville</answer>"
MALFORMED = {
    "bad_json": "x</think>\n<tool_call>\n{not json}\n</tool_call>",
    "missing_name": 'x</think>\n<tool_call>\n{"arguments": {}}\n</tool_call>',
    "unknown_tool": call("calculator", {"expr": "1+1"}),
    "bad_arguments": call("web_search", {"query": "not a list"}),
    "unclosed_tool_call": 'x</think>\n<tool_call>\n{"name": "web_search"',
    "unclosed_answer": "x</think>\n<answer>Fredville",
    "no_action": "I am not sure what to do.",
}


class RecordingGenerator(ScriptedGenerator):
    """Scripted replies, remembering what it returned so tests can compare with the trajectory."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sampled: dict[str, list[list[int]]] = {}

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        result = await super().generate(prompt_ids, params)
        key = self._key_of(self._tokenizer.decode(prompt_ids)) if self._key_of else ""
        self.sampled.setdefault(key, []).append(list(result.token_ids))
        return result


def key_of_question(prompt: str) -> str:
    return prompt.split("QUESTION ", 1)[1].split("<", 1)[0].strip().split()[0]


async def rollout(tokenizer, scripts: dict[str, list[str]], cfg: AgentConfig | None = None, toolbox=None):
    generator = RecordingGenerator(tokenizer, scripts, key_of=key_of_question)
    toolbox = toolbox or EchoToolBox()
    template = ChatTemplate(tokenizer, TOOLS)
    tasks = [RolloutTask(task_id=k, question=f"QUESTION {k} what is the capital?") for k in scripts]
    trajectories = await run_rollouts(
        tasks, generator, toolbox, tokenizer, cfg or AgentConfig(), template=template, make_context=Context
    )
    generator.assert_consumed()
    for trajectory in trajectories:
        check_token_contract(trajectory, template, generator.sampled.get(trajectory.task_id, []))
    return {t.task_id: t for t in trajectories}, toolbox


def check_token_contract(trajectory: Trajectory, template: ChatTemplate, sampled: list[list[int]]) -> None:
    """Mask is 1 exactly on the sampled ids, kept as sampled; the decoded whole is what the model saw."""
    policy = [s for s in trajectory.segments if s.source == "policy"]
    assert [s.token_ids for s in policy] == sampled
    ids, mask = trajectory.completion_ids, trajectory.completion_mask
    assert len(ids) == len(mask) == len(trajectory.completion_logprobs)
    assert sum(mask) == sum(len(s) for s in sampled)
    position = 0
    seen = template.prompt_text(trajectory.question)
    assert trajectory.prompt_ids == template.encode(seen)
    for segment in trajectory.segments[1:]:
        n = len(segment.token_ids)
        assert mask[position : position + n] == [int(segment.source == "policy")] * n
        position += n
    for i, turn in enumerate(trajectory.turns):
        seen += template.tokenizer.decode(sampled[i])
        if i + 1 < len(trajectory.turns):
            observation = turn.tool_call.text if turn.tool_call else f"Error: {turn.format_error.split(': ', 1)[1]}"
            seen += template.observation_text(observation, sampled[i])
    assert template.tokenizer.decode(trajectory.all_ids) == seen


async def test_search_browse_answer(tokenizer, tmp_path):
    """A clean episode: two tool calls, then the answer; ends with `answer` and survives a JSONL round trip."""
    trajectories, toolbox = await rollout(tokenizer, {"clean": [SEARCH, BROWSE, ANSWER]})
    trajectory = trajectories["clean"]
    assert trajectory.termination == "answer" and trajectory.answer == "Fredville"
    assert [t.tool_call.name for t in trajectory.turns[:2]] == ["web_search", "browse_webpage"]
    assert trajectory.turns[0].tool_call.text.startswith("web_search result")
    assert trajectory.format_errors == 0
    assert [s.source for s in trajectory.segments] == ["prompt", "policy", "env", "policy", "env", "policy"]
    path = save_trajectories(tmp_path / "t.jsonl", [trajectory])
    assert load_trajectories(path)[0].all_ids == trajectory.all_ids


async def test_every_malformed_kind_gets_an_error_observation(tokenizer):
    """Each malformed turn is counted and answered with an observation naming the problem; the episode goes on."""
    trajectories, toolbox = await rollout(
        tokenizer, {"malformed": [*MALFORMED.values(), ANSWER]}, AgentConfig(max_turns=20)
    )
    trajectory = trajectories["malformed"]
    assert trajectory.termination == "answer"
    assert trajectory.format_errors == len(MALFORMED)
    kinds = [t.format_error.split(":")[0] for t in trajectory.turns[:-1]]
    assert kinds == list(MALFORMED)
    assert toolbox.calls == []
    assert "calculator" in trajectory.turns[2].format_error and "web_search" in trajectory.turns[2].format_error


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_end_on_format_error_ends_the_episode(qwen_tokenizer, kind):
    """With the paper's switch on, any malformed turn ends the episode with `format_error`."""
    trajectories, _ = await rollout(qwen_tokenizer, {"strict": [MALFORMED[kind]]}, AgentConfig(end_on_format_error=True))
    trajectory = trajectories["strict"]
    assert trajectory.termination == "format_error" and trajectory.format_errors == 1
    assert [s.source for s in trajectory.segments] == ["prompt", "policy"]


async def test_max_turns_stops_without_running_the_last_call(tokenizer):
    """After max_turns turns without an answer the episode ends; the last turn's tool call is not run."""
    trajectories, toolbox = await rollout(tokenizer, {"loop": [SEARCH, SEARCH]}, AgentConfig(max_turns=2))
    trajectory = trajectories["loop"]
    assert trajectory.termination == "max_turns" and trajectory.answer is None
    assert len(toolbox.calls) == 1 and len(trajectory.turns) == 2


async def test_observation_that_would_overflow_ends_cleanly(tokenizer):
    """An observation that would not fit the context budget ends the episode instead of being cut."""
    cfg = AgentConfig(context_budget=1200, min_turn_tokens=32)
    trajectories, _ = await rollout(tokenizer, {"big": [SEARCH]}, cfg, EchoToolBox(observation_words=2000))
    trajectory = trajectories["big"]
    assert trajectory.termination == "context_budget"
    assert len(trajectory.all_ids) <= cfg.context_budget
    assert trajectory.segments[-1].source == "policy"


async def test_prompt_longer_than_budget_ends_before_generating(tokenizer):
    """If the prompt alone leaves no room for a turn, nothing is generated."""
    trajectories, _ = await rollout(tokenizer, {"tiny": []}, AgentConfig(context_budget=64))
    assert trajectories["tiny"].termination == "context_budget"
    assert trajectories["tiny"].turns == []


async def test_turn_cut_by_the_budget_ends_with_context_budget(qwen_tokenizer):
    """A turn that runs into the budget (not the per-turn limit) ends the episode with `context_budget`."""
    template = ChatTemplate(qwen_tokenizer, TOOLS)
    prompt_len = len(template.encode(template.prompt_text("QUESTION cut what is the capital?")))
    cfg = AgentConfig(context_budget=prompt_len + 40, min_turn_tokens=8)
    trajectories, _ = await rollout(qwen_tokenizer, {"cut": ["word " * 200]}, cfg)
    trajectory = trajectories["cut"]
    assert trajectory.termination == "context_budget"
    assert trajectory.turns[0].finish_reason == "length"
    assert len(trajectory.all_ids) == cfg.context_budget


async def test_failing_tool_becomes_an_observation(tokenizer):
    """A toolbox exception is shown to the model as an error and the episode continues to its answer."""
    explode = call("web_search", {"query": ["explode"]})
    trajectories, _ = await rollout(tokenizer, {"boom": [explode, ANSWER]})
    trajectory = trajectories["boom"]
    assert trajectory.termination == "answer"
    assert "backend exploded" in trajectory.turns[0].tool_call.error
    assert "backend exploded" in trajectory.turns[0].tool_call.text


async def test_concurrent_rollouts_follow_their_own_scripts(qwen_tokenizer):
    """Many rollouts at once each keep their own tokens and end with their own reason."""
    scripts = {f"r{i}": [SEARCH, ANSWER] if i % 2 else [SEARCH, SEARCH] for i in range(8)}
    trajectories, toolbox = await rollout(qwen_tokenizer, scripts, AgentConfig(max_turns=2))
    assert {k: t.termination for k, t in trajectories.items()} == {
        k: "answer" if int(k[1:]) % 2 else "max_turns" for k in scripts
    }
