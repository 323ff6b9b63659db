"""The one interface every policy generator implements: prompt ids in, sampled ids and logprobs out.

The agent loop owns the prompt as token ids and appends exactly what comes back, so training sees
the tokens that were sampled. Generators that cannot return ids (hosted OpenAI-compatible models)
say so with ``exact_tokens = False``; their trajectories are for evaluation only.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from deepresearcher.inference.sampling import FinishReason, GenerationResult, SamplingParams

__all__ = ["FinishReason", "GenerationResult", "Generator", "SamplingParams"]


@runtime_checkable
class Generator(Protocol):
    """A policy: samples a continuation of token ids. Implementations batch concurrent calls themselves."""

    exact_tokens: bool
    """True when ``token_ids`` are the ids the model sampled (trainable); False for text-only APIs."""

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult: ...

    async def aclose(self) -> None: ...
