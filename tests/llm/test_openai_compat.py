"""The OpenAI-compatible client against a real loopback server: replies, usage, retries, limits."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import (
    BackendUnavailableError,
    BadResponseError,
    ConfigError,
    RateLimitedError,
)
from deepresearcher.llm import make_chat_client
from deepresearcher.llm.openai_compat import OpenAIChatClient
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def config(server: OpenAIEmulator, **overrides) -> LLMClientConfig:
    values = {"kind": "openai", "base_url": server.base_url, "model": "emu", "backoff_s": 0.01,
              "max_backoff_s": 0.2, "timeout_s": 2.0}
    values.update(overrides)
    return LLMClientConfig(**values)


async def test_reply_usage_and_cost_are_counted():
    """A reply's text comes back, and tokens and cost accumulate at the configured prices."""
    with OpenAIEmulator([Reply(text="Paris is the capital.")]).running() as server:
        async with OpenAIChatClient(config(server, price_prompt_per_1k=2.0, price_completion_per_1k=10.0)) as client:
            result = await client.chat(MESSAGES, max_tokens=7, temperature=0.3)
    assert result.text == "Paris is the capital."
    assert (result.prompt_tokens, result.completion_tokens, result.finish_reason) == (6, 4, "stop")
    assert server.requests[0]["max_tokens"] == 7 and server.requests[0]["temperature"] == 0.3
    assert client.usage.requests == 1
    assert client.usage.cost == pytest.approx((6 * 2.0 + 4 * 10.0) / 1000)


async def test_429_with_retry_after_is_honoured_then_succeeds():
    """429 is retried after the server's Retry-After, and the retry is counted."""
    script = [Reply(status=429, retry_after=0.3), Reply(text="ok")]
    with OpenAIEmulator(script).running() as server:
        async with OpenAIChatClient(config(server, max_backoff_s=5.0)) as client:
            started = time.monotonic()
            result = await client.chat(MESSAGES)
            waited = time.monotonic() - started
    assert result.text == "ok"
    assert waited >= 0.3
    assert client.usage.retries == 1 and len(server.requests) == 2


async def test_5xx_and_timeouts_are_retried():
    """A 503 and an attempt slower than the timeout are both retried until a reply arrives."""
    script = [Reply(status=503), Reply(text="late", delay_s=1.0), Reply(text="ok")]
    with OpenAIEmulator(script).running() as server:
        async with OpenAIChatClient(config(server, timeout_s=0.3)) as client:
            result = await client.chat(MESSAGES)
    assert result.text == "ok"
    assert client.usage.retries == 2


async def test_retries_are_bounded_and_end_in_a_typed_error():
    """A server that always answers 429 exhausts the retries and raises RateLimitedError saying so."""
    with OpenAIEmulator([Reply(status=429)] * 10).running() as server:
        async with OpenAIChatClient(config(server, max_retries=2)) as client:
            with pytest.raises(RateLimitedError, match="gave up after 2 retries"):
                await client.chat(MESSAGES)
    assert len(server.requests) == 3
    assert client.usage.failures == 1


async def test_client_errors_are_not_retried():
    """A 400 is the caller's mistake: raised at once as BadResponseError, with no retry."""
    with OpenAIEmulator([Reply(status=400), Reply(text="never")]).running() as server:
        async with OpenAIChatClient(config(server)) as client:
            with pytest.raises(BadResponseError, match="HTTP 400"):
                await client.chat(MESSAGES)
    assert len(server.requests) == 1


async def test_unreachable_server_raises_unavailable():
    """Connection refused maps onto BackendUnavailableError after the retries."""
    with OpenAIEmulator().running() as server:
        url = server.base_url
    cfg = LLMClientConfig(kind="openai", base_url=url, model="emu", max_retries=1, backoff_s=0.01)
    async with OpenAIChatClient(cfg) as client:
        with pytest.raises(BackendUnavailableError, match="unreachable"):
            await client.chat(MESSAGES)


async def test_concurrency_cap_holds():
    """No more requests are in flight than ``concurrency``, however many are sent at once."""
    with OpenAIEmulator(responder=lambda body: Reply(text="ok", delay_s=0.1)).running() as server:
        async with OpenAIChatClient(config(server, concurrency=2)) as client:
            results = await asyncio.gather(*(client.chat(MESSAGES) for _ in range(6)))
    assert [r.text for r in results] == ["ok"] * 6
    assert server.max_in_flight == 2


async def test_rate_limit_spaces_request_starts():
    """With requests_per_second=20, five requests take at least 4 intervals (0.2 s)."""
    with OpenAIEmulator(responder=lambda body: Reply(text="ok")).running() as server:
        async with OpenAIChatClient(config(server, requests_per_second=20)) as client:
            started = time.monotonic()
            await asyncio.gather(*(client.chat(MESSAGES) for _ in range(5)))
            elapsed = time.monotonic() - started
    assert elapsed >= 0.19


def test_api_key_comes_from_the_named_environment_variable(monkeypatch):
    """The key is read from api_key_env; a missing variable is a ConfigError naming it."""
    monkeypatch.delenv("DR_TEST_KEY", raising=False)
    cfg = LLMClientConfig(kind="openai", model="m", api_key_env="DR_TEST_KEY")
    with pytest.raises(ConfigError, match="DR_TEST_KEY"):
        make_chat_client(cfg)
    monkeypatch.setenv("DR_TEST_KEY", "sk-test")
    assert isinstance(make_chat_client(cfg), OpenAIChatClient)


async def test_key_is_sent_as_bearer(monkeypatch):
    """The server receives the key in the Authorization header."""
    monkeypatch.setenv("DR_TEST_KEY", "sk-secret")
    with OpenAIEmulator([Reply(text="ok")]).running() as server:
        async with OpenAIChatClient(config(server, api_key_env="DR_TEST_KEY")) as client:
            await client.chat(MESSAGES)
    assert server.headers[0]["Authorization"] == "Bearer sk-secret"


def test_one_client_serves_successive_event_loops():
    """A client used under one asyncio.run and then another (as CLI commands do) still works."""

    async def ask(client: OpenAIChatClient, close: bool) -> str:
        try:
            return (await client.chat(MESSAGES)).text
        finally:
            if close:
                await client.aclose()

    with OpenAIEmulator(responder=lambda body: Reply(text="ok", delay_s=0.05)).running() as server:
        client = OpenAIChatClient(config(server, concurrency=1, requests_per_second=50))
        assert asyncio.run(ask(client, close=False)) == "ok"
        assert asyncio.run(ask(client, close=True)) == "ok"
