"""Async client for any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, hosted APIs).

Built on aiohttp with what a rollout fleet needs: a cap on requests in flight, an optional cap on
request starts per second, a per-attempt timeout, and bounded retries with exponential backoff and
jitter on 429, 5xx, timeouts and network errors (a server's ``Retry-After`` is honoured, capped).
Other 4xx answers are the caller's mistake and are raised at once. The API key is read from the
environment variable named in the config and never logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from typing import Any

import aiohttp
from typing_extensions import Self

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import (
    BackendUnavailableError,
    BadResponseError,
    ConfigError,
    RateLimitedError,
)
from deepresearcher.llm.base import ChatResult, Message, Usage

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class _RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart (a leaky bucket of size one)."""

    def __init__(self, rate: float | None) -> None:
        self._interval = 1.0 / rate if rate else 0.0
        self._next_start = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self._interval:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next_start - now
            self._next_start = max(now, self._next_start) + self._interval
        if delay > 0:
            await asyncio.sleep(delay)


def _retry_after_seconds(value: str | None) -> float | None:
    """Parse a ``Retry-After`` header given in seconds; HTTP dates are rare for APIs and ignored."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class OpenAIChatClient:
    """Chat completions over HTTP; see the module docstring for the retry policy.

    Example::

        client = OpenAIChatClient(LLMClientConfig(kind="openai", base_url="http://gpu:8000/v1", model="qwen"))
        reply = await client.chat([{"role": "user", "content": "hi"}], max_tokens=16)
    """

    def __init__(self, config: LLMClientConfig) -> None:
        if not config.model:
            raise ConfigError("An `openai` client needs `model`: the name the server serves (see its /v1/models).")
        self.config = config
        self.model = config.model
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.usage = Usage(
            price_prompt_per_1k=config.price_prompt_per_1k, price_completion_per_1k=config.price_completion_per_1k
        )
        self._headers = {"Content-Type": "application/json"}
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise ConfigError(
                    f"Environment variable {config.api_key_env} (api_key_env) is not set; export the API key "
                    "there or set api_key_env to null for a server without keys."
                )
            self._headers["Authorization"] = f"Bearer {key}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore = asyncio.Semaphore(config.concurrency)
        self._limiter = _RateLimiter(config.requests_per_second)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _bind_loop(self) -> None:
        """Tie the session, the cap and the rate limiter to the running loop (anew if the loop changed)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._session = None  # a session of a finished loop cannot be reused
            self._semaphore = asyncio.Semaphore(self.config.concurrency)
            self._limiter = _RateLimiter(self.config.requests_per_second)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=aiohttp.ClientTimeout(total=self.config.timeout_s)
            )
        return self._session

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with full jitter, or the server's Retry-After; capped either way."""
        if retry_after is not None:
            return min(retry_after, self.config.max_backoff_s)
        base = self.config.backoff_s * (2**attempt)
        return min(self.config.max_backoff_s, random.uniform(base / 2, base))

    async def chat(self, messages: list[Message], **sampling: Any) -> ChatResult:
        """Send one chat completion, retrying transient failures; see the module docstring."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": sampling.pop("max_tokens", self.config.max_new_tokens),
            "temperature": sampling.pop("temperature", self.config.temperature),
        }
        if messages and messages[-1]["role"] == "assistant":
            # A prefilled reply start; vLLM and SGLang continue it with these two flags.
            body.update(continue_final_message=True, add_generation_prompt=False)
        body.update({k: v for k, v in sampling.items() if v is not None})
        self._bind_loop()
        last_error: Exception | None = None
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                self.usage.retries += 1
            retry_after: float | None = None
            try:
                async with self._semaphore:
                    await self._limiter.wait()
                    return self._record(await self._post(body))
            except RateLimitedError as exc:
                last_error, retry_after = exc, exc.retry_after
            except BackendUnavailableError as exc:
                last_error = exc
            if attempt < self.config.max_retries:
                delay = self._backoff(attempt, retry_after)
                logger.info("%s: %s; retry %d/%d in %.2fs", self.url, last_error, attempt + 1,
                            self.config.max_retries, delay)
                await asyncio.sleep(delay)
        self.usage.failures += 1
        assert last_error is not None
        raise type(last_error)(
            f"{last_error} (gave up after {self.config.max_retries} retries; raise max_retries or check the server)"
        ) from last_error

    async def _post(self, body: dict[str, Any]) -> ChatResult:
        """One HTTP attempt, with aiohttp's errors mapped onto ours."""
        started = time.monotonic()
        try:
            async with self._get_session().post(self.url, json=body) as response:
                if response.status == 429:
                    raise RateLimitedError(
                        f"{self.url} answered 429 Too Many Requests",
                        retry_after=_retry_after_seconds(response.headers.get("Retry-After")),
                    )
                if response.status in _RETRYABLE_STATUS:
                    raise BackendUnavailableError(f"{self.url} answered HTTP {response.status}")
                if response.status >= 400:
                    detail = (await response.text())[:300]
                    raise BadResponseError(
                        f"{self.url} answered HTTP {response.status}: {detail} (check model name, key and request)"
                    )
                payload = await response.json(content_type=None)
        except asyncio.TimeoutError as exc:
            raise BackendUnavailableError(f"{self.url} did not answer within {self.config.timeout_s}s") from exc
        except aiohttp.ClientError as exc:
            raise BackendUnavailableError(f"{self.url} is unreachable: {exc}") from exc
        except ValueError as exc:  # body that is not JSON
            raise BadResponseError(f"{self.url} answered a body that is not JSON: {exc}") from exc
        return self._parse(payload, time.monotonic() - started)

    def _parse(self, payload: Any, latency: float) -> ChatResult:
        try:
            choice = payload["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BadResponseError(f"{self.url} answered JSON without choices[0].message: {str(payload)[:200]}") from exc
        usage = payload.get("usage") or {}
        return ChatResult(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            model=str(payload.get("model") or self.model),
            finish_reason=str(choice.get("finish_reason") or ""),
            latency_s=latency,
        )

    def _record(self, result: ChatResult) -> ChatResult:
        self.usage.add(result)
        return result
