"""vLLM's Python API on the CPU, for tests of the in-process vLLM policies where vLLM cannot run (it needs a GPU).

:func:`vllm_modules` returns the modules our generators import (``vllm`` with ``SamplingParams`` and
``AsyncEngineArgs``, ``vllm.inputs`` with ``TokensPrompt``, ``vllm.v1.engine.async_llm`` with ``AsyncLLM``), for a
test to put in ``sys.modules``. :class:`EchoLLM` stands for ``vllm.LLM`` (what TRL colocates with the trainer):
``generate`` answers each token-id prompt with its last token, ``max_tokens`` times, and records every call, so a
test sees which turns went through it. ``AsyncLLM`` answers the same way, one request at a time.
"""

from __future__ import annotations

import importlib.machinery
import types
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Logprob:
    logprob: float


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]]
    finish_reason: str
    stop_reason: Any
    text: str


@dataclass
class RequestOutput:
    outputs: list[Completion]


@dataclass
class SamplingParams:
    """The fields of ``vllm.SamplingParams`` our generators set."""

    max_tokens: int
    temperature: float
    top_p: float
    stop: list[str] | None
    include_stop_str_in_output: bool
    skip_special_tokens: bool
    logprobs: int
    seed: int | None


def echo(prompt_ids: list[int], params: SamplingParams) -> RequestOutput:
    """The prompt's last token ``max_tokens`` times, each at log-probability -0.5; stopped by the first stop string
    when there is one (vLLM reports it as the stop reason), else by the length."""
    ids = [prompt_ids[-1]] * params.max_tokens
    stopped = bool(params.stop)
    return RequestOutput([Completion(ids, [{i: Logprob(-0.5)} for i in ids], "stop" if stopped else "length",
                                     params.stop[0] if params.stop else None, "x" * len(ids))])


@dataclass
class EchoLLM:
    """``vllm.LLM``: ``generate`` of a batch of token-id prompts, each answered by :func:`echo`; ``calls`` holds
    each call's prompts and sampling parameters."""

    calls: list[tuple[list[Any], list[SamplingParams]]] = field(default_factory=list)

    def generate(self, prompts: list[Any], sampling_params: list[SamplingParams], use_tqdm: bool = True) -> list[RequestOutput]:
        self.calls.append((prompts, sampling_params))
        return [echo(p["prompt_token_ids"], s) for p, s in zip(prompts, sampling_params, strict=True)]


@dataclass
class AsyncEngineArgs:
    """``vllm.AsyncEngineArgs``: the model and whatever else the caller passed."""

    model: str
    seed: int | None = None


class AsyncLLM:
    """``vllm.v1.engine.async_llm.AsyncLLM``: built from engine arguments, streams one :func:`echo` per request."""

    def __init__(self, args: AsyncEngineArgs) -> None:
        self.args = args
        self.requests: list[str] = []
        self.shut_down = False

    @classmethod
    def from_engine_args(cls, args: AsyncEngineArgs) -> AsyncLLM:
        return cls(args)

    async def generate(self, prompt: dict[str, Any], sampling: SamplingParams, request_id: str) -> AsyncIterator[RequestOutput]:
        self.requests.append(request_id)
        yield echo(prompt["prompt_token_ids"], sampling)

    def shutdown(self) -> None:
        self.shut_down = True


def vllm_modules() -> dict[str, types.ModuleType]:
    """The ``vllm`` modules our generators import, by name, each with a module spec (so ``importlib.util.find_spec``
    finds vLLM "installed" while they are in ``sys.modules``)."""
    def module(name: str, **attrs: Any) -> types.ModuleType:
        made = types.ModuleType(name)
        made.__spec__ = importlib.machinery.ModuleSpec(name, None)
        made.__dict__.update(attrs)
        return made

    inputs = module("vllm.inputs", TokensPrompt=dict)  # vLLM's TokensPrompt is a TypedDict
    async_llm = module("vllm.v1.engine.async_llm", AsyncLLM=AsyncLLM)
    engine = module("vllm.v1.engine", async_llm=async_llm)
    v1 = module("vllm.v1", engine=engine)
    root = module("vllm", SamplingParams=SamplingParams, AsyncEngineArgs=AsyncEngineArgs, LLM=EchoLLM, inputs=inputs, v1=v1)
    return {m.__name__: m for m in (root, inputs, v1, engine, async_llm)}
