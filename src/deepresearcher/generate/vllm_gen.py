"""vLLM policies: a vLLM OpenAI-compatible server that returns token ids, vLLM's AsyncLLM in process, or
the synchronous ``vllm.LLM`` a GRPO trainer colocates with its model (TRL's ``vllm_mode="colocate"``).

All send the prompt as token ids and get back the sampled ids and their logprobs, so trajectories stay
token-exact. vLLM is an optional extra, imported only when one of these is built or samples.

Server mode uses ``/v1/completions`` with a token-id prompt and ``return_tokens_as_token_ids`` (vLLM
then writes each logprob entry as ``token_id:<id>``), ``logprobs=0`` and ``include_stop_str_in_output``.
"""

from __future__ import annotations

import random
from typing import Any

from deepresearcher.errors import GenerationError, MissingDependencyError
from deepresearcher.generate.base import GenerationResult, SamplingParams
from deepresearcher.generate.batching import BatchingGenerator, Request
from deepresearcher.generate.openai_gen import POLICY_LIMITS, PolicyServer
from deepresearcher.retry import Limits

VLLM_EXTRA = "pip install vllm  (on a CUDA machine; it brings its own torch)"


def _finish(reason: str | None, stop_reason: Any) -> tuple[str, str | None]:
    if reason == "length":
        return "length", None
    return "stop", stop_reason if isinstance(stop_reason, str) else "eos"


def _token_ids_from_logprobs(tokens: list[str]) -> list[int]:
    try:
        return [int(t.split(":", 1)[1]) for t in tokens]
    except (IndexError, ValueError) as exc:
        raise GenerationError(
            "The server did not return token ids (expected `token_id:<id>` tokens); it must be vLLM with "
            "`return_tokens_as_token_ids` support (vLLM >= 0.6)."
        ) from exc


class VLLMServerGenerator:
    """A vLLM OpenAI-compatible server; token ids in, token ids and logprobs out. Transient failures
    (503 while the server is busy or reloading weights, timeouts) are retried as ``limits`` says."""

    exact_tokens = True

    def __init__(self, base_url: str, model: str | None = None, *, api_key_env: str | None = None,
                 limits: Limits = POLICY_LIMITS) -> None:
        self.server = PolicyServer(base_url, model, api_key_env=api_key_env, limits=limits)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        payload = {
            "model": await self.server.model_name(),
            "prompt": prompt_ids,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop": params.stop or None,
            "include_stop_str_in_output": True,
            "skip_special_tokens": False,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "seed": params.seed,
        }
        body = await self.server.post("/completions", payload)
        try:
            choice = body["choices"][0]
            logprobs = choice["logprobs"]
            ids = _token_ids_from_logprobs(logprobs["tokens"])
            values = [float(v if v is not None else 0.0) for v in logprobs["token_logprobs"]]
        except (KeyError, IndexError, TypeError) as exc:
            raise self.server.unexpected(body) from exc
        finish, stop = _finish(choice.get("finish_reason"), choice.get("stop_reason"))
        return GenerationResult(token_ids=ids, logprobs=values, finish_reason=finish, stop_reason=stop,
                                text=choice.get("text"))

    async def aclose(self) -> None:
        await self.server.aclose()


class VLLMEngineGenerator:
    """vLLM's AsyncLLM in this process (one GPU node); continuous batching across rollouts."""

    exact_tokens = True

    def __init__(self, model: str, **engine_kwargs: Any) -> None:
        try:
            from vllm import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise MissingDependencyError(f"The vLLM policy needs vLLM: {VLLM_EXTRA}") from exc
        self._engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=model, **engine_kwargs))
        self._counter = 0

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        sampling = _vllm_sampling(VSamplingParams, params)
        self._counter += 1
        final = None
        async for output in self._engine.generate(TokensPrompt(prompt_token_ids=prompt_ids), sampling,
                                                  request_id=f"dr-{self._counter}"):
            final = output
        return _request_result(final)

    async def aclose(self) -> None:
        self._engine.shutdown()


class VLLMColocatedGenerator(BatchingGenerator):
    """The trainer's own ``vllm.LLM`` (TRL colocate mode): the rollouts of a step sample as one ``generate`` call.

    TRL loads the policy's current weights into this engine before every step's rollouts, so episodes are
    sampled on-policy; the engine batches the turns of all rollouts that are waiting at once. A request
    without its own seed draws one from a generator seeded with ``seed``, so a step's sampling is
    reproducible and the next step's (seed + 1) shares no request seed with it.
    """

    def __init__(self, llm: Any, *, seed: int = 0, max_batch: int = 4096, settle_yields: int = 3) -> None:
        super().__init__(max_batch=max_batch, settle_yields=settle_yields)
        self.llm = llm
        self._seeds = random.Random(seed)

    def _sample(self, batch: list[Request]) -> list[GenerationResult]:
        try:
            from vllm import SamplingParams as VSamplingParams
            from vllm.inputs import TokensPrompt
        except ImportError as exc:
            raise MissingDependencyError(f"The colocated vLLM policy needs vLLM: {VLLM_EXTRA}") from exc
        prompts = [TokensPrompt(prompt_token_ids=request.prompt_ids) for request in batch]
        sampling = []
        for request in batch:
            seed = request.params.seed if request.params.seed is not None else self._seeds.getrandbits(31)
            sampling.append(_vllm_sampling(VSamplingParams, request.params.model_copy(update={"seed": seed})))
        outputs = self.llm.generate(prompts, sampling_params=sampling, use_tqdm=False)
        return [_request_result(output) for output in outputs]


def _vllm_sampling(factory: Any, params: SamplingParams) -> Any:
    """vLLM sampling parameters for one turn: stop strings kept in the output, one logprob per token."""
    return factory(
        max_tokens=params.max_tokens, temperature=params.temperature, top_p=params.top_p, stop=params.stop or None,
        include_stop_str_in_output=True, skip_special_tokens=False, logprobs=0, seed=params.seed,
    )


def _request_result(output: Any) -> GenerationResult:
    """A vLLM ``RequestOutput``'s first completion as token ids, the sampled tokens' logprobs and why it stopped."""
    if output is None or not output.outputs:
        raise GenerationError("vLLM returned no output for a request.")
    completion = output.outputs[0]
    ids = list(completion.token_ids)
    logprobs = [entry[token].logprob for entry, token in zip(completion.logprobs or [], ids)]
    finish, stop = _finish(completion.finish_reason, completion.stop_reason)
    return GenerationResult(token_ids=ids, logprobs=logprobs or None, finish_reason=finish, stop_reason=stop,
                            text=completion.text)
