"""Chat completions from any OpenAI-compatible server (vLLM, SGLang, hosted APIs), for the reader and the judge.

The HTTP side (concurrency cap, rate limit, per-attempt timeout, bounded retries with backoff, the API key)
is :class:`deepresearcher.inference.http.OpenAIHttpClient`, the client the policy uses too; this module
builds the request from a config and reads the reply, counting tokens, cost and retries in :class:`Usage`.
Failures are ``BackendError`` subclasses, as :class:`ChatClient` promises.
"""

from __future__ import annotations

import time
from typing import Any

from typing_extensions import Self

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import BadResponseError, ConfigError
from deepresearcher.inference.http import OpenAIHttpClient
from deepresearcher.retry import Limits
from deepresearcher.llm.base import ChatResult, Message, Usage


class OpenAIChatClient:
    """Chat completions over HTTP with the retry policy of ``inference.http``.

    Example::

        client = OpenAIChatClient(LLMClientConfig(kind="openai", base_url="http://gpu:8000/v1", model="qwen"))
        reply = await client.chat([{"role": "user", "content": "hi"}], max_tokens=16)
    """

    def __init__(self, config: LLMClientConfig) -> None:
        if not config.model:
            raise ConfigError("An `openai` client needs `model`: the name the server serves (see its /v1/models).")
        self.config = config
        self.model = config.model
        self.usage = Usage(
            price_prompt_per_1k=config.price_prompt_per_1k, price_completion_per_1k=config.price_completion_per_1k
        )
        limits = Limits(
            timeout_s=config.timeout_s, retries=config.max_retries, backoff_s=config.backoff_s,
            max_backoff_s=config.max_backoff_s, concurrency=config.concurrency,
            rate_per_s=config.requests_per_second,
        )
        self._http = OpenAIHttpClient(config.base_url, api_key_env=config.api_key_env, limits=limits, counts=self.usage)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def chat(self, messages: list[Message], **sampling: Any) -> ChatResult:
        """Send one chat completion, retrying transient failures; see ``inference.http``."""
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
        started = time.monotonic()
        payload = await self._http.post("/chat/completions", body)
        result = self._parse(payload, time.monotonic() - started)
        self.usage.add(result)
        return result

    def _parse(self, payload: Any, latency: float) -> ChatResult:
        try:
            choice = payload["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BadResponseError(
                f"{self._http.base_url}/chat/completions answered JSON without choices[0].message: {str(payload)[:200]}"
            ) from exc
        usage = payload.get("usage") or {}
        return ChatResult(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            model=str(payload.get("model") or self.model),
            finish_reason=str(choice.get("finish_reason") or ""),
            latency_s=latency,
        )
