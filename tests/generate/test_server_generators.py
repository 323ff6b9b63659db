"""Server-backed policies against an emulated vLLM/OpenAI completions server on loopback."""

from __future__ import annotations

import pytest
from aiohttp import web

from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError, GenerationError
from deepresearcher.generate.base import SamplingParams
from deepresearcher.generate.factory import make_policy
from deepresearcher.generate.openai_gen import OpenAITextGenerator, restore_stop
from deepresearcher.generate.vllm_gen import VLLMServerGenerator


class FakeTokenizer:
    """Characters are tokens (id = code point): enough to check what goes over the wire."""

    def decode(self, ids):
        return "".join(map(chr, ids))

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture
async def server():
    """A loopback server speaking vLLM's completions dialect; records the requests it got."""
    seen: list[dict] = []

    async def models(request):
        return web.json_response({"data": [{"id": "policy-7b"}]})

    async def completions(request):
        body = await request.json()
        seen.append(body)
        if body.get("max_tokens") == 999:
            return web.json_response({"error": "overloaded"}, status=503)
        reply = "ok</tool_call>"
        if body.get("return_tokens_as_token_ids"):
            logprobs = {"tokens": [f"token_id:{ord(c)}" for c in reply], "token_logprobs": [-0.5] * len(reply)}
            return web.json_response({"choices": [{"text": reply, "logprobs": logprobs, "finish_reason": "stop",
                                                   "stop_reason": "</tool_call>"}]})
        return web.json_response({"choices": [{"text": "<tool_call>{}", "finish_reason": "stop"}]})

    async def chat(request):
        body = await request.json()
        seen.append(body)
        content = '<think>plan</think>\n<tool_call>{"name": "web_search", "arguments": {"query": ["q"]}}'
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": content},
                                               "finish_reason": "stop"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/v1", seen
    await runner.cleanup()


async def test_vllm_server_sends_ids_and_returns_sampled_ids(server):
    """Token ids go out as the prompt; the sampled ids and logprobs come back from `token_id:<id>` entries."""
    url, seen = server
    generator = VLLMServerGenerator(url)
    result = await generator.generate([1, 2, 3], SamplingParams(max_tokens=5, stop=["</tool_call>"]))
    await generator.aclose()
    assert seen[0]["prompt"] == [1, 2, 3] and seen[0]["model"] == "policy-7b"
    assert seen[0]["include_stop_str_in_output"] is True
    assert result.token_ids == [ord(c) for c in "ok</tool_call>"]
    assert result.logprobs == [-0.5] * len(result.token_ids)
    assert (result.finish_reason, result.stop_reason) == ("stop", "</tool_call>")


async def test_server_errors_are_generation_errors(server):
    """A 5xx from the server is a GenerationError naming the server, not a crash deep in a rollout."""
    url, _ = server
    generator = VLLMServerGenerator(url, "policy-7b")
    with pytest.raises(GenerationError, match="503"):
        await generator.generate([1], SamplingParams(max_tokens=999))
    await generator.aclose()


async def test_openai_text_generator_restores_the_stop_string(server):
    """The text policy sends the decoded prompt, puts back the cut stop string, and is marked not token-exact."""
    url, seen = server
    generator = OpenAITextGenerator(url, FakeTokenizer(), "m")
    result = await generator.generate([72, 105], SamplingParams(max_tokens=5, stop=["</tool_call>"]))
    await generator.aclose()
    assert seen[0]["prompt"] == "Hi" and not generator.exact_tokens
    assert result.text == "<tool_call>{}</tool_call>" and result.stop_reason == "</tool_call>"
    assert result.logprobs is None


async def test_chat_api_sends_the_conversation_as_messages(server):
    """Chat-only hosted models get the ChatML prompt back as messages; the open <think> turn is theirs to write."""
    url, seen = server
    prompt = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>"
    generator = OpenAITextGenerator(url, FakeTokenizer(), "m", api="chat")
    result = await generator.generate([ord(c) for c in prompt], SamplingParams(max_tokens=50, stop=["</tool_call>"]))
    await generator.aclose()
    assert seen[0]["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    assert result.text == 'plan</think>\n<tool_call>{"name": "web_search", "arguments": {"query": ["q"]}}</tool_call>'


def test_restore_stop_only_closes_an_open_tag():
    assert restore_stop("done", ["</answer>"]) == ("done", None)
    assert restore_stop("<answer>x", ["</tool_call>", "</answer>"]) == ("<answer>x</answer>", "</answer>")


def test_unknown_policy_is_a_config_error():
    """A policy string that names nothing says which forms are accepted."""
    with pytest.raises(ConfigError, match="vllm:http"):
        make_policy(load_config(None, ["agent.policy=/no/such/dir"]))
