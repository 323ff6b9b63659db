"""Server-backed policies against the OpenAI-compatible emulator on loopback, speaking vLLM's completions dialect.

Both server policies go through the one model HTTP client (``inference.http``), so a server's passing 503
or 429 is retried and the rollout goes on; a 400 is raised at once as the policy's ``GenerationError``.
"""

from __future__ import annotations

import json
import time

import pytest

from deepresearcher.agent.loop import RolloutTask, run_rollouts
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.config import AgentConfig, load_config
from deepresearcher.errors import ConfigError, GenerationError
from deepresearcher.generate.base import SamplingParams
from deepresearcher.generate.factory import make_policy
from deepresearcher.generate.openai_gen import OpenAITextGenerator, restore_stop
from deepresearcher.generate.vllm_gen import VLLMServerGenerator
from deepresearcher.retry import Limits
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply

FAST = Limits(timeout_s=5.0, retries=2, backoff_s=0.01, max_backoff_s=1.0)
STOP = ["</tool_call>", "</answer>"]


class FakeTokenizer:
    """Characters are tokens (id = code point): enough to check what goes over the wire."""

    def decode(self, ids):
        return "".join(map(chr, ids))

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


async def test_vllm_server_sends_ids_and_returns_sampled_ids():
    """Token ids go out as the prompt; the sampled ids and logprobs come back from `token_id:<id>` entries."""
    with OpenAIEmulator([Reply(text="ok</tool_call>")], tokenizer=FakeTokenizer()).running() as server:
        generator = VLLMServerGenerator(server.base_url, limits=FAST)
        result = await generator.generate([1, 2, 3], SamplingParams(max_tokens=5, stop=STOP))
        await generator.aclose()
    sent = server.requests[0]
    assert sent["prompt"] == [1, 2, 3] and sent["model"] == "emulator"
    assert sent["include_stop_str_in_output"] is True
    assert result.token_ids == [ord(c) for c in "ok</tool_call>"]
    assert result.logprobs == [-0.5] * len(result.token_ids)
    assert (result.finish_reason, result.stop_reason) == ("stop", "</tool_call>")


async def test_a_503_is_retried_and_the_turn_succeeds():
    """A server busy for one request (503) is asked again; the caller sees only the good answer."""
    script = [Reply(status=503), Reply(text="ok</answer>")]
    with OpenAIEmulator(script, tokenizer=FakeTokenizer()).running() as server:
        generator = VLLMServerGenerator(server.base_url, "policy-7b", limits=FAST)
        result = await generator.generate([1], SamplingParams(max_tokens=5, stop=STOP))
        await generator.aclose()
    assert len(server.requests) == 2
    assert result.token_ids == [ord(c) for c in "ok</answer>"]
    assert generator.server.http.counts.retries == 1


async def test_retries_are_bounded_and_end_in_a_generation_error():
    """A server that keeps answering 503 exhausts the retries; the policy raises GenerationError saying so."""
    with OpenAIEmulator(responder=lambda body: Reply(status=503)).running() as server:
        generator = VLLMServerGenerator(server.base_url, "policy-7b", limits=FAST)
        with pytest.raises(GenerationError, match=r"503.*gave up after 2 retries"):
            await generator.generate([1], SamplingParams(max_tokens=5))
        await generator.aclose()
    assert len(server.requests) == 3


async def test_a_400_is_raised_at_once():
    """A 400 is the request's fault: no retry, a GenerationError naming the status."""
    with OpenAIEmulator([Reply(status=400), Reply(text="never")]).running() as server:
        generator = VLLMServerGenerator(server.base_url, "policy-7b", limits=FAST)
        with pytest.raises(GenerationError, match="HTTP 400"):
            await generator.generate([1], SamplingParams(max_tokens=5))
        await generator.aclose()
    assert len(server.requests) == 1


async def test_retry_after_is_honoured():
    """A 429's Retry-After is waited out even when the backoff alone would retry sooner."""
    script = [Reply(status=429, retry_after=0.4), Reply(text="<answer>x</answer>")]
    with OpenAIEmulator(script, tokenizer=FakeTokenizer()).running() as server:
        generator = OpenAITextGenerator(server.base_url, FakeTokenizer(), "m", limits=FAST)
        started = time.monotonic()
        result = await generator.generate([72, 105], SamplingParams(max_tokens=5, stop=STOP))
        waited = time.monotonic() - started
        await generator.aclose()
    assert result.text == "<answer>x</answer>"
    assert waited >= 0.4 and len(server.requests) == 2


def test_a_missing_key_variable_is_a_config_error(monkeypatch):
    """A policy whose key variable is not exported fails at construction, naming the variable."""
    monkeypatch.delenv("DR_POLICY_KEY", raising=False)
    with pytest.raises(ConfigError, match="DR_POLICY_KEY"):
        VLLMServerGenerator("http://127.0.0.1:9/v1", "m", api_key_env="DR_POLICY_KEY")


async def test_openai_text_generator_restores_the_stop_string():
    """The text policy sends the decoded prompt, puts back the stop string the server cut, and is not token-exact."""
    with OpenAIEmulator([Reply(text="<tool_call>{}</tool_call>")]).running() as server:
        generator = OpenAITextGenerator(server.base_url, FakeTokenizer(), "m", limits=FAST)
        result = await generator.generate([72, 105], SamplingParams(max_tokens=5, stop=["</tool_call>"]))
        await generator.aclose()
    assert server.requests[0]["prompt"] == "Hi" and not generator.exact_tokens
    assert result.text == "<tool_call>{}</tool_call>" and result.stop_reason == "</tool_call>"
    assert result.logprobs is None


async def test_chat_api_sends_the_conversation_as_messages():
    """Chat-only hosted models get the ChatML prompt back as messages; the open <think> turn is theirs to write."""
    prompt = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>"
    content = '<think>plan</think>\n<tool_call>{"name": "web_search", "arguments": {"query": ["q"]}}'
    with OpenAIEmulator([Reply(text=content)]).running() as server:
        generator = OpenAITextGenerator(server.base_url, FakeTokenizer(), "m", api="chat", limits=FAST)
        result = await generator.generate([ord(c) for c in prompt], SamplingParams(max_tokens=50, stop=STOP))
        await generator.aclose()
    assert server.requests[0]["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    assert result.text == 'plan</think>\n<tool_call>{"name": "web_search", "arguments": {"query": ["q"]}}</tool_call>'


class Outcome:
    def __init__(self, text: str) -> None:
        self.text, self.error, self.raw = text, None, None


class NoteToolBox:
    """Every call gets the same note; what matters here is the policy side."""

    async def call(self, name, arguments, context):
        return Outcome("Fredville is the capital of Freedonia.")


async def test_a_rollout_survives_a_policy_server_503(qwen_tokenizer):
    """Search, then the server answers 503 once, then the answer: the episode ends with `answer`, token-exact."""
    search = "plan</think>\n<tool_call>\n" + json.dumps(
        {"name": "web_search", "arguments": {"query": ["capital of Freedonia"]}}) + "\n</tool_call>"
    answer = "found it</think>\n<answer>Fredville</answer>"
    script = [Reply(text=search), Reply(status=503), Reply(text=answer)]
    with OpenAIEmulator(script, tokenizer=qwen_tokenizer).running() as server:
        generator = VLLMServerGenerator(server.base_url, "policy-7b", limits=FAST)
        template = ChatTemplate(qwen_tokenizer)
        [trajectory] = await run_rollouts(
            [RolloutTask(task_id="t", question="What is the capital of Freedonia?")], generator, NoteToolBox(),
            qwen_tokenizer, AgentConfig(max_turns=3), template=template,
        )
        await generator.aclose()
    assert len(server.requests) == 3
    assert trajectory.termination == "answer" and trajectory.answer == "Fredville"
    policy = [s.token_ids for s in trajectory.segments if s.source == "policy"]
    assert policy == [qwen_tokenizer(t, add_special_tokens=False)["input_ids"] for t in (search, answer)]


def test_restore_stop_only_closes_an_open_tag():
    assert restore_stop("done", ["</answer>"]) == ("done", None)
    assert restore_stop("<answer>x", ["</tool_call>", "</answer>"]) == ("<answer>x</answer>", "</answer>")


def test_unknown_policy_is_a_config_error():
    """A policy string that names nothing says which forms are accepted."""
    with pytest.raises(ConfigError, match="vllm:http"):
        make_policy(load_config(None, ["agent.policy=/no/such/dir"]))
