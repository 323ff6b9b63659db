"""The policy endpoint speaks OpenAI's chat completions: tools and tool_calls, streaming, errors as OpenAI reports them.

A scripted policy (fixed turns, tokenized with the offline Qwen2.5 tokenizer and its real chat template) answers the
real ``openai`` SDK over a real loopback HTTP server.
"""

from __future__ import annotations

import json

import aiohttp
import pytest
from endpoint_testing import TOOLS, Recording, client, served

from deepresearcher.endpoint import ChatLayout, ChatRenderer, PolicyEndpoint, SamplingDefaults
from deepresearcher.generate.scripted import ScriptedGenerator, key_by_text

openai = pytest.importorskip("openai")

AGENT = ChatLayout(system=None, prefill="<think>", stop=("</tool_call>", "</answer>"), answer_tag=True)
SEARCH = ('I should search for Vesk.\n</think>\n<tool_call>\n{"name": "web_search", "arguments": {"query": '
          '["Vesk capital", "Norland"]}}\n</tool_call>')
ANSWER = "Vesk is Norland's capital.\n</think>\n<answer> Norland </answer>"
QUESTION = "Of which country is Vesk the capital?"


def endpoint(tokenizer, replies, layout: ChatLayout = AGENT, **defaults) -> PolicyEndpoint:
    key = key_by_text(tokenizer, {q: q for q in replies}) if isinstance(replies, dict) else None
    generator = Recording(ScriptedGenerator(tokenizer, replies, key_of=key))
    return PolicyEndpoint(generator, ChatRenderer(tokenizer, layout), model_name="tiny-policy",
                          defaults=SamplingDefaults(**defaults))


async def test_a_tool_call_and_an_answer_round_trip_in_openai_shape(qwen_tokenizer):
    policy = endpoint(qwen_tokenizer, [SEARCH, ANSWER])
    async with served(policy) as url:
        sdk = client(url, "episode-1")
        messages: list = [{"role": "system", "content": "You research."}, {"role": "user", "content": QUESTION}]
        first = await sdk.chat.completions.create(model="tiny-policy", messages=messages, tools=TOOLS)
        choice = first.choices[0]
        assert first.object == "chat.completion" and first.model == "tiny-policy"
        assert choice.finish_reason == "tool_calls"
        assert choice.message.role == "assistant" and choice.message.content is None
        assert choice.message.reasoning_content == "I should search for Vesk."
        (call,) = choice.message.tool_calls
        assert call.type == "function" and call.id.startswith("call_") and call.function.name == "web_search"
        assert json.loads(call.function.arguments) == {"query": ["Vesk capital", "Norland"]}
        sampled = policy.generator.calls[0]
        assert first.usage.prompt_tokens == len(sampled.prompt)
        assert first.usage.completion_tokens == len(sampled.result.token_ids)
        assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens

        # The template rendered the tools itself (Qwen's <tools> block), then the turn's prefill.
        prompt_text = qwen_tokenizer.decode(sampled.prompt)
        assert "<tools>" in prompt_text and '"name": "browse_webpage"' in prompt_text
        assert prompt_text.startswith("<|im_start|>system\nYou research.")
        assert prompt_text.endswith(f"{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>")
        assert sampled.params.stop == ["</tool_call>", "</answer>"]

        messages += [choice.message, {"role": "tool", "tool_call_id": call.id, "content": "Vesk: capital of Norland."}]
        second = await sdk.chat.completions.create(model="tiny-policy", messages=messages, tools=TOOLS)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Norland"
    assert second.choices[0].message.tool_calls is None
    assert "<tool_response>\nVesk: capital of Norland.\n</tool_response>" in qwen_tokenizer.decode(
        policy.generator.calls[1].prompt)
    first_turn = policy.generator.calls[0].prompt + policy.generator.calls[0].result.token_ids
    assert policy.generator.calls[1].prompt[:len(first_turn)] == first_turn, "the SDK's message object is recognised"
    assert policy.recorder.get("episode-1").drifts == 0


async def test_a_template_without_tools_gets_them_in_the_system_turn(tiny_model_dir):
    """Plain ChatML (the quickstart's tokenizer) has no ``tools``: the schemas go into the system turn, an earlier
    call into the assistant's text, and a tool result into a user turn in <tool_response>."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    renderer = ChatRenderer(tokenizer, ChatLayout())
    assert not renderer.renders_tools and renderer.splices
    messages = [{"role": "user", "content": "Q?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_x", "type": "function", "function": {"name": "web_search", "arguments": '{"query": ["q"]}'}}]},
                {"role": "tool", "tool_call_id": "call_x", "content": "hits"}]
    from deepresearcher.endpoint.openai_types import ChatMessage

    text = tokenizer.decode(renderer.prompt_ids([ChatMessage.model_validate(m) for m in messages], TOOLS))
    assert text.startswith("<|im_start|>system\n# Tools") and '"name": "web_search"' in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "web_search", "arguments": {"query": ["q"]}}\n</tool_call>' in text
    assert text.endswith("<|im_start|>user\n<tool_response>\nhits\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


async def test_a_stream_reassembles_to_the_same_answer(qwen_tokenizer):
    """The same turn streamed and not: the chunks (role, thinking, content, tool calls, finish, usage) add up to the
    non-streamed message, and the wire is server-sent events ending with ``data: [DONE]``."""
    twin = "Twin question?"
    policy = endpoint(qwen_tokenizer, {QUESTION: [SEARCH, ANSWER, ANSWER], twin: [SEARCH, ANSWER]})
    async with served(policy) as url:
        for script in ([SEARCH], [ANSWER]):
            plain = await client(url, f"plain-{len(script[0])}").chat.completions.create(
                model="tiny-policy", messages=[{"role": "user", "content": QUESTION}], tools=TOOLS)
            stream = await client(url, f"stream-{len(script[0])}").chat.completions.create(
                model="tiny-policy", messages=[{"role": "user", "content": twin}], tools=TOOLS, stream=True,
                stream_options={"include_usage": True})
            chunks = [chunk async for chunk in stream]
            assert all(c.object == "chat.completion.chunk" for c in chunks)
            content, reasoning, calls, finish = "", "", {}, None
            for chunk in chunks[:-1]:
                (choice,) = chunk.choices
                delta = choice.delta
                content += delta.content or ""
                reasoning += getattr(delta, "reasoning_content", None) or ""
                for call in delta.tool_calls or []:
                    calls.setdefault(call.index, {"id": call.id, "name": call.function.name, "arguments": ""})
                    calls[call.index]["arguments"] += call.function.arguments or ""
                finish = choice.finish_reason or finish
            message = plain.choices[0].message
            assert chunks[0].choices[0].delta.role == "assistant"
            assert (content or None) == message.content and reasoning == message.reasoning_content
            assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
                (c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
            assert all(c["id"].startswith("call_") for c in calls.values())
            assert finish == plain.choices[0].finish_reason
            usage = chunks[-1].usage
            assert chunks[-1].choices == [] and usage.completion_tokens == plain.usage.completion_tokens
            assert usage.prompt_tokens == len(policy.generator.calls[-1].prompt)

        async with aiohttp.ClientSession() as http, http.post(
                f"{url}/episodes/raw/v1/chat/completions", json={
                    "model": "tiny-policy", "messages": [{"role": "user", "content": QUESTION}], "stream": True}) as raw:
            assert raw.headers["content-type"].startswith("text/event-stream")
            events = [line for line in (await raw.text()).split("\n\n") if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"


async def error_of(http: aiohttp.ClientSession, method: str, path: str, status: int, **kwargs) -> dict:
    """The error body of a raw request, checked to be OpenAI's shape and answered with ``status``."""
    async with http.request(method, path, **kwargs) as response:
        body = await response.json()
        assert response.status == status, body
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


async def test_errors_are_shaped_as_openai_reports_them(qwen_tokenizer):
    policy = endpoint(qwen_tokenizer, [SEARCH], context_budget=400)
    async with served(policy) as url:
        sdk = client(url, "errors")
        ask = {"model": "tiny-policy", "messages": [{"role": "user", "content": QUESTION}]}
        with pytest.raises(openai.NotFoundError) as unknown:
            await sdk.chat.completions.create(**{**ask, "model": "gpt-4o"})
        assert unknown.value.code == "model_not_found" and unknown.value.param == "model"
        with pytest.raises(openai.BadRequestError) as many:
            await sdk.chat.completions.create(**ask, n=2)
        assert many.value.param == "n" and many.value.type == "invalid_request_error"
        with pytest.raises(openai.BadRequestError) as long:
            await sdk.chat.completions.create(**{**ask, "messages": [{"role": "user", "content": "word " * 500}]})
        assert long.value.code == "context_length_exceeded" and long.value.param == "messages"
        with pytest.raises(openai.BadRequestError) as bad_role:
            await sdk.chat.completions.create(**{**ask, "messages": [{"role": "robot", "content": "hi"}]})
        assert bad_role.value.param == "messages.0.role"

        async with aiohttp.ClientSession(base_url=url) as http:
            not_json = await error_of(http, "POST", "/v1/chat/completions", 400, data=b"{'model': oops",
                                      headers={"content-type": "application/json"})
            assert not_json["type"] == "invalid_request_error"
            missing = await error_of(http, "POST", "/v1/chat/completions", 400, json={"model": "tiny-policy"})
            assert (missing["param"], missing["code"]) == ("messages", "missing_required_parameter")
            assert (await error_of(http, "GET", "/v1/nowhere", 404))["code"] == "unknown_url"
            assert (await error_of(http, "GET", "/episodes/never-seen", 404))["code"] == "episode_not_found"

        assert (await sdk.chat.completions.create(**ask)).choices[0].finish_reason == "tool_calls"
        with pytest.raises(openai.InternalServerError) as failed:  # the script is used up: the policy raises
            await sdk.chat.completions.create(**ask)
        assert failed.value.status_code == 500 and failed.value.type == "server_error"
        assert [m.id for m in (await sdk.models.list()).data] == ["tiny-policy"]
    assert policy.recorder.stats()["requests"] == 1, "failed requests are not recorded"


async def test_training_forces_the_sampling_the_trainer_computes_logprobs_at(qwen_tokenizer):
    policy = endpoint(qwen_tokenizer, [SEARCH, SEARCH], temperature=0.7, top_p=0.9, max_tokens=50, force=True)
    served_policy = endpoint(qwen_tokenizer, [SEARCH], temperature=0.7, top_p=0.9, max_tokens=50)
    ask = {"model": "tiny-policy", "messages": [{"role": "user", "content": QUESTION}], "temperature": 0.0,
           "top_p": 0.5, "seed": 3, "max_tokens": 500, "stop": ["STOP"]}
    async with served(policy) as url:
        await client(url, "a").chat.completions.create(**ask)
        await client(url, "b").chat.completions.create(**ask)
    async with served(served_policy) as url:
        await client(url, "a").chat.completions.create(**ask)
    forced, other = policy.generator.calls[0].params, policy.generator.calls[1].params
    assert (forced.temperature, forced.top_p, forced.seed, forced.max_tokens) == (0.7, 0.9, None, 50)
    assert forced.stop == ["</tool_call>", "</answer>", "STOP"]
    assert forced.session != other.session, "each episode samples from its own stream"
    honoured = served_policy.generator.calls[0].params
    assert (honoured.temperature, honoured.top_p, honoured.seed, honoured.max_tokens) == (0.0, 0.5, 3, 50)
