"""The rollout loop: every branch driven by a scripted policy, ending with its documented reason,
and the token-in/token-out contract checked on every trajectory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepresearcher.agent.loop import RolloutTask, run_rollouts
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.agent.tools import ToolBox
from deepresearcher.agent.trajectory import (
    Trajectory,
    load_trajectories,
    save_trajectories,
)
from deepresearcher.config import AgentConfig, load_config
from deepresearcher.generate.base import GenerationResult, SamplingParams
from deepresearcher.generate.scripted import ScriptedGenerator, key_by_text
from deepresearcher.web.environment import WebEnvironment


@pytest.fixture(scope="module")
def world_config(tmp_path_factory):
    """A tiny synthetic world, built and indexed once for this module."""
    from deepresearcher.web.local_world import ensure_world

    config = load_config(None, ["world.size=tiny", f"cache_dir={tmp_path_factory.mktemp('cache')}"])
    ensure_world(config)
    return config


@pytest.fixture(scope="module")
def world_task(world_config):
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    return next(t for t in load_tasks(ensure_world(world_config), "test") if t.answerable and len(t.chain) == 1)


@pytest.fixture
async def toolbox(world_config):
    """The real ToolBox over the real local index and extractive reader of the tiny world."""
    env = WebEnvironment.from_config(world_config)
    yield ToolBox(env, world_config)
    await env.aclose()


class ExplodingToolBox(ToolBox):
    """The real ToolBox, except that the query `explode` raises, as a buggy tool would."""

    async def call(self, name: str, arguments: Any, context: Any):
        if arguments.get("query") == ["explode"]:
            raise RuntimeError("backend exploded")
        return await super().call(name, arguments, context)


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

    def __init__(self, tokenizer: Any, scripts: dict[str, list[str]], key_of: Any) -> None:
        super().__init__(tokenizer, scripts, key_of=key_of)
        self.key_of = key_of
        self.sampled: dict[str, list[list[int]]] = {}

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        result = await super().generate(prompt_ids, params)
        key = self.key_of(prompt_ids)
        self.sampled.setdefault(key, []).append(list(result.token_ids))
        return result


async def rollout(tokenizer, toolbox, scripts: dict[str, list[str]], cfg: AgentConfig | None = None,
                  questions: dict[str, str] | None = None):
    """Run one scripted rollout per script key, concurrently, and check the token contract of each."""
    questions = questions or {k: f"Question {k}: what is the capital?" for k in scripts}
    generator = RecordingGenerator(tokenizer, scripts, key_of=key_by_text(tokenizer, questions))
    template = ChatTemplate(tokenizer)
    tasks = [RolloutTask(task_id=k, question=questions[k]) for k in scripts]
    trajectories = await run_rollouts(tasks, generator, toolbox, tokenizer, cfg or AgentConfig(), template=template)
    generator.assert_consumed()
    for trajectory in trajectories:
        check_token_contract(trajectory, template, generator.sampled.get(trajectory.task_id, []))
    return {t.task_id: t for t in trajectories}


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


async def test_search_browse_answer(tokenizer, toolbox, world_task, tmp_path):
    """A clean episode on a world question: search, browse the evidence, answer; ends with `answer`."""
    hop = world_task.chain[0]
    scripts = {"clean": [
        call("web_search", {"query": [hop.query]}),
        call("browse_webpage", {"url_list": hop.evidence_urls[:1]}),
        f"the page says it</think>\n<answer>{world_task.golds[0]}</answer>",
    ]}
    trajectories = await rollout(tokenizer, toolbox, scripts, questions={"clean": world_task.question})
    trajectory = trajectories["clean"]
    assert trajectory.termination == "answer" and trajectory.answer == world_task.golds[0]
    search, browse = (t.tool_call for t in trajectory.turns[:2])
    assert (search.name, browse.name) == ("web_search", "browse_webpage")
    assert hop.evidence_urls[0] in search.text and search.error is None
    assert world_task.golds[0] in browse.text and browse.error is None
    assert trajectory.format_errors == 0
    assert [s.source for s in trajectory.segments] == ["prompt", "policy", "env", "policy", "env", "policy"]
    path = save_trajectories(tmp_path / "t.jsonl", [trajectory])
    assert load_trajectories(path)[0].all_ids == trajectory.all_ids


async def test_every_malformed_kind_gets_an_error_observation(tokenizer, toolbox):
    """Each malformed turn is counted and answered with an observation naming the problem; the episode goes on."""
    trajectories = await rollout(tokenizer, toolbox, {"malformed": [*MALFORMED.values(), ANSWER]}, AgentConfig(max_turns=20))
    trajectory = trajectories["malformed"]
    assert trajectory.termination == "answer"
    assert trajectory.format_errors == len(MALFORMED)
    assert [t.format_error.split(":")[0] for t in trajectory.turns[:-1]] == list(MALFORMED)
    assert all(t.tool_call is None for t in trajectory.turns)
    assert "calculator" in trajectory.turns[2].format_error and "web_search" in trajectory.turns[2].format_error


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_end_on_format_error_ends_the_episode(qwen_tokenizer, toolbox, kind):
    """With the paper's switch on, any malformed turn ends the episode with `format_error`."""
    cfg = AgentConfig(end_on_format_error=True)
    trajectory = (await rollout(qwen_tokenizer, toolbox, {"strict": [MALFORMED[kind]]}, cfg))["strict"]
    assert trajectory.termination == "format_error" and trajectory.format_errors == 1
    assert [s.source for s in trajectory.segments] == ["prompt", "policy"]


async def test_max_turns_stops_without_running_the_last_call(tokenizer, toolbox):
    """After max_turns turns without an answer the episode ends; the last turn's tool call is not run."""
    trajectory = (await rollout(tokenizer, toolbox, {"loop": [SEARCH, SEARCH]}, AgentConfig(max_turns=2)))["loop"]
    assert trajectory.termination == "max_turns" and trajectory.answer is None
    assert len(trajectory.turns) == 2
    assert trajectory.turns[0].tool_call.text and not trajectory.turns[1].tool_call.text


async def test_observation_that_would_overflow_ends_cleanly(tokenizer, toolbox):
    """An observation that would not fit the context budget ends the episode instead of being cut."""
    template = ChatTemplate(tokenizer)
    prompt_len = len(template.encode(template.prompt_text("Question big: what is the capital?")))
    cfg = AgentConfig(context_budget=prompt_len + 150, min_turn_tokens=32)
    trajectory = (await rollout(tokenizer, toolbox, {"big": [SEARCH]}, cfg))["big"]
    assert trajectory.termination == "context_budget"
    assert len(template.encode(trajectory.turns[0].tool_call.text)) > 150
    assert len(trajectory.all_ids) <= cfg.context_budget
    assert trajectory.segments[-1].source == "policy"


async def test_prompt_longer_than_budget_ends_before_generating(tokenizer, toolbox):
    """If the prompt alone leaves no room for a turn, nothing is generated."""
    trajectory = (await rollout(tokenizer, toolbox, {"tiny": []}, AgentConfig(context_budget=64)))["tiny"]
    assert trajectory.termination == "context_budget" and trajectory.turns == []


async def test_turn_cut_by_the_budget_ends_with_context_budget(qwen_tokenizer, toolbox):
    """A turn that runs into the budget (not the per-turn limit) ends the episode with `context_budget`."""
    template = ChatTemplate(qwen_tokenizer)
    prompt_len = len(template.encode(template.prompt_text("Question cut: what is the capital?")))
    cfg = AgentConfig(context_budget=prompt_len + 40, min_turn_tokens=8)
    trajectory = (await rollout(qwen_tokenizer, toolbox, {"cut": ["word " * 200]}, cfg))["cut"]
    assert trajectory.termination == "context_budget"
    assert trajectory.turns[0].finish_reason == "length"
    assert len(trajectory.all_ids) == cfg.context_budget


async def test_tool_errors_and_tool_crashes_become_observations(tokenizer, world_config):
    """Arguments the tool refuses, and a tool that raises, both reach the model as errors; the episode goes on."""
    env = WebEnvironment.from_config(world_config)
    try:
        scripts = {"boom": [call("web_search", {"query": ["explode"]}), call("web_search", {"query": [" "]}), ANSWER]}
        trajectory = (await rollout(tokenizer, ExplodingToolBox(env, world_config), scripts))["boom"]
    finally:
        await env.aclose()
    assert trajectory.termination == "answer" and trajectory.format_errors == 0
    crash, refused = (t.tool_call for t in trajectory.turns[:2])
    assert "backend exploded" in crash.error and "backend exploded" in crash.text
    assert "empty" in refused.error and "empty" in refused.text


async def test_concurrent_rollouts_follow_their_own_scripts(qwen_tokenizer, toolbox):
    """Many rollouts at once each keep their own tokens and end with their own reason."""
    scripts = {f"r{i}": [SEARCH, ANSWER] if i % 2 else [SEARCH, SEARCH] for i in range(8)}
    trajectories = await rollout(qwen_tokenizer, toolbox, scripts, AgentConfig(max_turns=2))
    assert {k: t.termination for k, t in trajectories.items()} == {
        k: "answer" if int(k[1:]) % 2 else "max_turns" for k in scripts
    }
