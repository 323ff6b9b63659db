"""The colocated vLLM policy against a stand-in for ``vllm.LLM`` that speaks its Python API.

vLLM needs a CUDA GPU, so these tests install a minimal ``vllm`` module (``SamplingParams``,
``inputs.TokensPrompt``) and an engine whose ``generate`` returns ``RequestOutput``-shaped objects:
what is checked is our side of the contract (one batched call per round, token-id prompts, stop
strings kept, per-request seeds, ids/logprobs/finish reasons mapped back).
"""

from __future__ import annotations

import asyncio
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from deepresearcher.generate.base import SamplingParams
from deepresearcher.generate.vllm_gen import VLLMColocatedGenerator


@dataclass
class _Logprob:
    logprob: float


@dataclass
class _Completion:
    token_ids: list[int]
    logprobs: list[dict[int, _Logprob]]
    finish_reason: str
    stop_reason: Any
    text: str


@dataclass
class _RequestOutput:
    outputs: list[_Completion]


@dataclass
class _Sampling:
    max_tokens: int
    temperature: float
    top_p: float
    stop: list[str] | None
    include_stop_str_in_output: bool
    skip_special_tokens: bool
    logprobs: int
    seed: int | None


@dataclass
class StandInLLM:
    """Echoes each prompt's last token back ``max_tokens`` times; stops on "</tool_call>" when asked to."""

    calls: list[tuple[list[Any], list[_Sampling]]] = field(default_factory=list)

    def generate(self, prompts: list[Any], sampling_params: list[_Sampling], use_tqdm: bool = True) -> list[_RequestOutput]:
        assert use_tqdm is False, "a rollout round must not print a progress bar per turn"
        self.calls.append((prompts, sampling_params))
        outputs = []
        for prompt, params in zip(prompts, sampling_params, strict=True):
            ids = [prompt["prompt_token_ids"][-1]] * params.max_tokens
            stopped = bool(params.stop)
            outputs.append(_RequestOutput([_Completion(
                ids, [{i: _Logprob(-0.5)} for i in ids], "stop" if stopped else "length",
                params.stop[0] if stopped else None, "x" * len(ids))]))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("vllm")
    module.SamplingParams = _Sampling  # type: ignore[attr-defined]
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = dict  # type: ignore[attr-defined]  # vLLM's TokensPrompt is a TypedDict
    module.inputs = inputs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)


async def test_concurrent_turns_sample_in_one_engine_call(fake_vllm: None) -> None:
    llm = StandInLLM()
    generator = VLLMColocatedGenerator(llm, seed=100)
    params = SamplingParams(max_tokens=3, temperature=1.0, stop=["</tool_call>"])
    results = await asyncio.gather(*(generator.generate([5, 6, 7 + i], params) for i in range(4)))
    await generator.aclose()

    assert len(llm.calls) == 1, "the rollouts waiting together must share one generate call"
    prompts, sampling = llm.calls[0]
    assert [p["prompt_token_ids"] for p in prompts] == [[5, 6, 7], [5, 6, 8], [5, 6, 9], [5, 6, 10]]
    assert all(s.include_stop_str_in_output and s.logprobs == 0 and s.stop == ["</tool_call>"] for s in sampling)
    seeds = [s.seed for s in sampling]
    assert len(set(seeds)) == 4, "each request draws its own seed"
    again = VLLMColocatedGenerator(StandInLLM(), seed=100)
    await asyncio.gather(*(again.generate([1], params) for _ in range(4)))
    assert [s.seed for s in again.llm.calls[0][1]] == seeds, "the same generator seed gives the same request seeds"
    next_step = VLLMColocatedGenerator(StandInLLM(), seed=101)
    await asyncio.gather(*(next_step.generate([1], params) for _ in range(4)))
    assert not set(seeds) & {s.seed for s in next_step.llm.calls[0][1]}, "adjacent steps must not share seeds"
    assert [r.token_ids for r in results] == [[7] * 3, [8] * 3, [9] * 3, [10] * 3]
    assert all(r.logprobs == [-0.5] * 3 and r.finish_reason == "stop" and r.stop_reason == "</tool_call>" for r in results)


async def test_length_finish_and_explicit_seed(fake_vllm: None) -> None:
    llm = StandInLLM()
    generator = VLLMColocatedGenerator(llm)
    result = await generator.generate([1, 2], SamplingParams(max_tokens=2, temperature=0.7, seed=9))
    assert result.finish_reason == "length" and result.stop_reason is None
    assert llm.calls[0][1][0].seed == 9 and llm.calls[0][1][0].temperature == 0.7


async def test_engine_failure_fails_every_waiting_turn(fake_vllm: None) -> None:
    class Broken(StandInLLM):
        def generate(self, *args: Any, **kwargs: Any) -> list[_RequestOutput]:
            raise RuntimeError("CUDA out of memory")

    generator = VLLMColocatedGenerator(Broken())
    outcomes = await asyncio.gather(*(generator.generate([1], SamplingParams(max_tokens=1)) for _ in range(3)),
                                    return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes)
