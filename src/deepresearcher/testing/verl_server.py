"""A scripted token server speaking verl's server-manager interface, for running verl's agent loops on a CPU.

verl's ``AgentLoopWorker`` hands each agent loop an ``LLMServerClient`` whose only use there is
``await generate(request_id, *, prompt_ids, sampling_params) -> TokenOutput``. This double answers that
call from a ``ScriptedGenerator`` (our test double: scripted replies, tokenized once, cut at
``max_tokens``), returns verl's own ``TokenOutput`` with ``stop_reason="completed"`` as verl's vLLM
server does for both stop strings and the token limit, and gives each sampled token a distinct logprob
so tests can check that logprobs stay aligned with tokens. It records every request it served.
Needs verl installed (``TokenOutput``).
"""

from __future__ import annotations

from typing import Any

from deepresearcher.generate.base import SamplingParams
from deepresearcher.generate.scripted import ScriptedGenerator


def scripted_logprob(position: int) -> float:
    """The logprob the server reports for the token at ``position`` of a response (distinct per position)."""
    return -0.001 * (position + 1)


class ScriptedTokenServer:
    """verl's ``LLMServerClient.generate`` over scripted replies; picklable, so it can go to a Ray actor."""

    def __init__(self, generator: ScriptedGenerator) -> None:
        self.generator = generator
        self.requests: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append({"request_id": request_id, "prompt_len": len(prompt_ids), **sampling_params})
        params = SamplingParams(max_tokens=sampling_params["max_tokens"], stop=sampling_params.get("stop") or [])
        result = await self.generator.generate(list(prompt_ids), params)
        logprobs = [scripted_logprob(i) for i in range(len(result.token_ids))]
        if not sampling_params.get("logprobs"):
            logprobs = None
        return TokenOutput(token_ids=result.token_ids, log_probs=logprobs, stop_reason="completed")
