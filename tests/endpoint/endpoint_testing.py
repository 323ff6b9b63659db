"""The policy endpoint under test: a real uvicorn server on a loopback port, the real ``openai`` SDK as the client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from deepresearcher.endpoint import LoopbackServer, PolicyEndpoint, create_app, episode_base_url
from deepresearcher.generate.base import GenerationResult, Generator, SamplingParams

openai = pytest.importorskip("openai")

TOOLS = [
    {"type": "function", "function": {
        "name": "web_search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "array", "items": {"type": "string"}}},
                       "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "browse_webpage", "description": "Read pages.",
        "parameters": {"type": "object", "properties": {"url_list": {"type": "array", "items": {"type": "string"}}},
                       "required": ["url_list"]}}},
]


@dataclass
class Call:
    prompt: list[int]
    params: SamplingParams
    result: GenerationResult


class Recording:
    """A generator that remembers every prompt it read and what it returned, to check the record against."""

    def __init__(self, inner: Generator) -> None:
        self.inner = inner
        self.exact_tokens = inner.exact_tokens
        self.calls: list[Call] = []

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        result = await self.inner.generate(prompt_ids, params)
        self.calls.append(Call(list(prompt_ids), params, result))
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextlib.asynccontextmanager
async def served(endpoint: PolicyEndpoint) -> AsyncIterator[str]:
    """``endpoint`` on a free loopback port for the block: its base URL."""
    async with LoopbackServer(create_app(endpoint)) as url:
        yield url


def client(url: str, episode: str | None = None, api_key: str = "unused") -> Any:
    """An SDK client whose requests belong to ``episode`` (by its base URL), or to the API key's episode."""
    base = episode_base_url(url, episode) if episode is not None else f"{url}/v1"
    return openai.AsyncOpenAI(base_url=base, api_key=api_key, max_retries=0, timeout=120)
