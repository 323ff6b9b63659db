"""Token-exact episodes: what the endpoint records is one token sequence of sampled and observed ids while the client
re-sends its history as returned, and drift is detected, counted and split into segments when it rewrites it.

The real tiny model (random weights, so its turns are arbitrary token strings that do not survive decode and
re-encode) samples behind a real loopback server; the client is the real ``openai`` SDK.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from endpoint_testing import TOOLS, Recording, client, served

from deepresearcher.endpoint import ChatLayout, ChatRenderer, PolicyEndpoint, SamplingDefaults
from deepresearcher.endpoint.openai_types import ChatMessage
from deepresearcher.generate.scripted import ScriptedGenerator

pytest.importorskip("torch")
openai = pytest.importorskip("openai")

THINK = ChatLayout(prefill="<think>")


@pytest.fixture
async def tiny_policy(tiny_model_dir):
    from transformers import AutoTokenizer

    from deepresearcher.inference.engine import LocalEngine

    engine = LocalEngine.from_pretrained(str(tiny_model_dir), batch_wait_s=0.01, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    policy = PolicyEndpoint(Recording(engine), ChatRenderer(tokenizer, THINK), model_name="tiny",
                            defaults=SamplingDefaults(temperature=1.0, max_tokens=12, context_budget=2000))
    yield policy
    await engine.aclose()


async def converse(sdk, question: str, observations: list[str], rewrite=None) -> None:
    """A client that asks, then re-sends its history (as the SDK returned it, or through ``rewrite``) with each
    observation as a new user turn."""
    messages: list = [{"role": "user", "content": question}]
    for n, observation in enumerate([*observations, None]):
        reply = await sdk.chat.completions.create(model="tiny", messages=messages, max_tokens=12)
        if observation is None:
            return
        message = reply.choices[0].message.model_dump(exclude_none=True)
        messages += [rewrite(n, message) if rewrite else message, {"role": "user", "content": observation}]


def decode(policy: PolicyEndpoint, ids: list[int]) -> str:
    return policy.renderer.decode(ids, keep_special=True)


async def test_an_unchanged_history_is_one_token_sequence_of_sampled_and_observed_ids(tiny_policy):
    policy = tiny_policy
    async with served(policy) as url:
        await converse(client(url, "exact"), "Who founded Acme Works?", ["obs one", "obs two"])
    calls = policy.generator.calls
    sampled = [c.result.token_ids for c in calls]
    renderer = policy.renderer
    assert any(renderer.encode(renderer.decode(ids)) != ids for ids in sampled), \
        "precondition: the turns do not survive re-tokenization, so only splicing can make them exact"
    for before, after in zip(calls, calls[1:]):  # each prompt extends the previous prompt and sample exactly
        assert after.prompt[:len(before.prompt) + len(before.result.token_ids)] == before.prompt + before.result.token_ids

    episode = policy.recorder.get("exact")
    assert episode is not None and episode.drifts == 0 and len(episode.exchanges) == 3
    (trajectory,) = policy.finish("exact")
    assert policy.recorder.get("exact") is None, "finish takes the episode"
    assert trajectory.all_ids == calls[-1].prompt + sampled[-1]
    assert trajectory.prompt_ids == calls[0].prompt
    policy_segments = [s for s in trajectory.segments if s.source == "policy"]
    assert [s.token_ids for s in policy_segments] == sampled
    assert [s.logprobs for s in policy_segments] == [c.result.logprobs for c in calls]
    observed = [decode(policy, s.token_ids) for s in trajectory.segments if s.source == "env"]
    assert len(observed) == 2 and "obs one" in observed[0] and "obs two" in observed[1]
    assert all(text.endswith("<|im_start|>assistant\n<think>") for text in observed), "the next opening is observed"
    mask, logprobs = trajectory.completion_mask, trajectory.completion_logprobs
    assert sum(mask) == sum(len(ids) for ids in sampled)
    assert [lp for lp, m in zip(logprobs, mask) if m] == [lp for c in calls for lp in c.result.logprobs]
    assert trajectory.metadata == {"episode_id": "exact", "segment": 0, "segments": 1, "drifts": 0, "exact_tokens": True}
    assert trajectory.question == "Who founded Acme Works?"
    assert trajectory.response_text.startswith("<think>")


async def test_a_client_that_rewrites_its_history_drifts_and_each_turn_keeps_its_own_context(tiny_policy):
    """The client trims its first reply before re-sending it: the re-rendered turn cannot be the sampled one, so the
    drift is counted and a new segment starts whose prompt (loss 0) holds the rewritten turn."""
    policy = tiny_policy

    def trim(n: int, message: dict) -> dict:
        return {**message, "content": message["content"][:-3].strip() + " (summarised)"} if n == 0 else message

    async with served(policy) as url:
        await converse(client(url, "drifty"), "Who founded Acme Works?", ["obs one", "obs two"], rewrite=trim)
        async with aiohttp.ClientSession() as http, http.get(f"{url}/healthz") as health:
            stats = await health.json()
    assert stats["drifted_requests"] == 1 and stats["requests"] == 3
    calls = policy.generator.calls
    sampled = [c.result.token_ids for c in calls]
    head = calls[0].prompt + sampled[0]
    assert calls[1].prompt[:len(head)] != head
    assert policy.recorder.get("drifty").drifts == 1

    first, second = policy.finish("drifty")
    assert first.all_ids == calls[0].prompt + sampled[0] and first.termination == "drift" and first.answer is None
    assert second.prompt_ids == calls[1].prompt, "the drifted turn is trained against the context it was sampled in"
    assert "(summarised)" in decode(policy, second.prompt_ids), "the rewritten turn is context, with loss 0"
    assert [s.token_ids for s in second.segments if s.source == "policy"] == sampled[1:]
    assert [s.token_ids for s in first.segments if s.source == "policy"] == sampled[:1]
    assert second.all_ids == calls[2].prompt + sampled[2]
    assert [t.metadata["segment"] for t in (first, second)] == [0, 1]
    assert all(t.metadata["drifts"] == 1 for t in (first, second))


async def test_concurrent_episodes_never_mix(tiny_policy):
    """Two agents at once, one named by its base URL, one by its API key: each episode holds its own turns only."""
    policy = tiny_policy
    async with served(policy) as url:
        await asyncio.gather(
            converse(client(url, "by-url"), "Question of agent A?", ["A-obs-1", "A-obs-2"]),
            converse(client(url, api_key="by-key"), "Question of agent B?", ["B-obs-1", "B-obs-2"]))
    assert policy.recorder.stats()["drifted_requests"] == 0
    for episode, mine, theirs in (("by-url", "A", "B"), ("by-key", "B", "A")):
        (trajectory,) = policy.finish(episode)
        text = decode(policy, trajectory.all_ids)
        assert f"Question of agent {mine}?" in text and f"{mine}-obs-2" in text
        assert f"agent {theirs}" not in text and f"{theirs}-obs" not in text
        assert sum(s.source == "policy" for s in trajectory.segments) == 3
        sampled = [c.result.token_ids for c in policy.generator.calls
                   if f"Question of agent {mine}?" in decode(policy, c.prompt)]
        assert [s.token_ids for s in trajectory.segments if s.source == "policy"] == sampled


SEARCH = ('Search first.\n</think>\n<tool_call>\n{"name": "web_search",   "arguments": {"query": ["Acme founder"]}}'
          '\n</tool_call>')
READ = 'Read it.\n</think>\n<tool_call>\n{"name": "browse_webpage", "arguments": {"url_list": ["https://a.example"]}}' \
       '\n</tool_call>'
ANSWER = "Done.\n</think>\n<answer>Alice Brown</answer>"


async def tool_episode(qwen_tokenizer, rewrite) -> PolicyEndpoint:
    """Three scripted turns with tool calls; the client re-sends each reply through ``rewrite``."""
    layout = ChatLayout(prefill="<think>", stop=("</tool_call>", "</answer>"), answer_tag=True)
    policy = PolicyEndpoint(Recording(ScriptedGenerator(qwen_tokenizer, [SEARCH, READ, ANSWER])),
                            ChatRenderer(qwen_tokenizer, layout), model_name="tiny")
    async with served(policy) as url:
        sdk = client(url, "tools")
        messages: list = [{"role": "user", "content": "Who founded Acme Works?"}]
        for n in range(3):
            reply = await sdk.chat.completions.create(model="tiny", messages=messages, tools=TOOLS)
            message = reply.choices[0].message.model_dump(exclude_none=True)
            if n < 2:
                (call,) = message["tool_calls"]
                messages += [rewrite(n, message), {"role": "tool", "tool_call_id": call["id"], "content": f"result {n}"}]
    return policy


def reformatted(n: int, message: dict) -> dict:
    """What many clients do: arguments re-serialised, the thinking dropped."""
    calls = [{**c, "function": {**c["function"], "arguments": json.dumps(json.loads(c["function"]["arguments"]),
                                                                         separators=(",", ":"))}}
             for c in message["tool_calls"]]
    return {"role": "assistant", "content": None, "tool_calls": calls}


async def test_a_reply_re_sent_with_reserialised_arguments_is_still_the_sampled_turn(qwen_tokenizer):
    policy = await tool_episode(qwen_tokenizer, reformatted)
    calls = policy.generator.calls
    renderer = policy.renderer
    assert renderer.renders_tools and renderer.splices
    question = [ChatMessage(role="user", content="Who founded Acme Works?")]
    assert renderer.prompt_ids(question, TOOLS) == calls[0].prompt
    episode = policy.recorder.get("tools")
    assert episode.drifts == 0
    (trajectory,) = policy.finish("tools")
    assert [s.token_ids for s in trajectory.segments if s.source == "policy"] == [c.result.token_ids for c in calls]
    assert trajectory.all_ids == calls[-1].prompt + calls[-1].result.token_ids
    assert '"name": "web_search",   "arguments"' in decode(policy, trajectory.all_ids), "the call as sampled"
    assert [t.tool_call.name for t in trajectory.turns[:2]] == ["web_search", "browse_webpage"]
    assert trajectory.answer == "Alice Brown" and trajectory.termination == "answer"


@pytest.mark.parametrize("change", ["arguments", "reasoning"])
async def test_a_reply_whose_call_or_thinking_was_edited_drifts(qwen_tokenizer, change):
    def edit(n: int, message: dict) -> dict:
        if n != 1:
            return message
        if change == "reasoning":
            return {**message, "reasoning_content": "Something else."}
        (call,) = message["tool_calls"]
        return {**message, "tool_calls": [{**call, "function": {**call["function"], "arguments": '{"url_list": []}'}}]}

    policy = await tool_episode(qwen_tokenizer, edit)
    calls = policy.generator.calls
    assert policy.recorder.stats()["drifted_requests"] == 1
    trajectories = policy.finish("tools")
    assert [len([s for s in t.segments if s.source == "policy"]) for t in trajectories] == [2, 1]
    assert trajectories[1].prompt_ids == calls[2].prompt
    assert trajectories[0].all_ids == calls[1].prompt + calls[1].result.token_ids
