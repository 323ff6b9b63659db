"""A scripted token server speaking verl's server-manager interface, for running verl's agent loops on a CPU.

verl's agent-loop workers hand each agent loop an ``LLMServerClient`` whose only use there is
``await generate(request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput``. This double
answers that call from a ``ScriptedGenerator`` (our test double: scripted replies, tokenized once, cut at
the token limit) and returns what verl's client returns from its vLLM server
(``verl.workers.rollout.llm_server.LLMServerClient.generate`` over ``vllm_async_server``):

- verl's own ``TokenOutput``, with ``stop_reason="completed"`` for both a stop string and the token limit;
- ``extra_fields`` holding the weights version that served the request (``global_steps``, set by the
  trainer through ``set_global_steps`` after each weight sync) and ``min_global_steps`` /
  ``max_global_steps`` (the client's defaults: that same version), plus ``num_cached_tokens``;
- ``max_tokens`` optional, as verl's own agent loops call it: without it the server allows
  ``min(response_length, prompt_length + response_length - len(prompt_ids))`` tokens (at least one);
- logprobs only when ``sampling_params["logprobs"]`` asks for them: a distinct value per position, so
  tests can check that logprobs stay aligned with tokens.

It records every request it served. Needs verl installed (``TokenOutput``).
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

    def __init__(self, generator: ScriptedGenerator, *, prompt_length: int | None = None,
                 response_length: int | None = None, global_steps: int = 0) -> None:
        """``prompt_length``/``response_length``: verl's rollout lengths, the server's limit for a request
        without ``max_tokens``; ``global_steps``: the weights version it starts with."""
        self.generator = generator
        self.prompt_length = prompt_length
        self.response_length = response_length
        self.global_steps = global_steps
        self.requests: list[dict[str, Any]] = []

    def set_global_steps(self, global_steps: int) -> None:
        """What verl's trainer tells each server after syncing weights into it."""
        self.global_steps = global_steps

    def _default_max_tokens(self, prompt_len: int) -> int:
        if self.prompt_length is None or self.response_length is None:
            raise TypeError("A request without max_tokens needs the server's prompt_length and response_length "
                            "(ScriptedTokenServer(..., prompt_length=, response_length=)), as verl's server has them.")
        return max(1, min(self.response_length, self.prompt_length + self.response_length - prompt_len))

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append({"request_id": request_id, "prompt_len": len(prompt_ids), **sampling_params})
        max_tokens = sampling_params.get("max_tokens") or self._default_max_tokens(len(prompt_ids))
        params = SamplingParams(max_tokens=max_tokens, stop=sampling_params.get("stop") or [])
        result = await self.generator.generate(list(prompt_ids), params)
        logprobs = [scripted_logprob(i) for i in range(len(result.token_ids))]
        if not sampling_params.get("logprobs"):
            logprobs = None
        version = self.global_steps
        return TokenOutput(token_ids=result.token_ids, log_probs=logprobs, stop_reason="completed", num_preempted=0,
                           extra_fields={"global_steps": version, "num_cached_tokens": 0,
                                         "min_global_steps": version, "max_global_steps": version})
