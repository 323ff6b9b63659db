"""verl's LLM server manager seen as our ``Generator``: token ids in, token ids and logprobs out.

verl's agent loops reach its vLLM/SGLang servers through ``server_manager.generate(request_id, *,
prompt_ids, sampling_params) -> TokenOutput``. This adapter sends each turn of our rollout engine there:

- ``max_tokens`` and ``stop`` come from the engine (per turn: the context budget and our stop strings);
- temperature, top-p, top-k and ``logprobs`` come from verl (its rollout config, greedy on validation);
- the request id is fixed per episode, so verl's router keeps an episode on one server (prefix cache).

verl reports ``stop_reason="completed"`` for both a stop string and the token limit, so ``finish_reason``
is ``length`` exactly when the server returned ``max_tokens`` tokens. Token ids are never re-encoded.

A weight sync aborts every turn in flight (verl's ``CheckpointEngineManager.update_weights``: abort, sync,
resume). verl's ``FullyAsyncLLMServerClient`` (fully_async's, and its v1 async trainers') resumes the turn
itself from the tokens it had unless ``async_training.partial_rollout`` is off, so this adapter sees one
whole turn whose ``min_global_steps``/``max_global_steps`` span both weights versions. A turn verl did not
resume comes back ``aborted`` with part of its tokens: that raises :class:`TurnAborted` (the turn is never
used; the agent loop drops the episode).

verl's server also returns ``extra_fields``: the weights version that served the turn (``global_steps``,
``min_global_steps``, ``max_global_steps``, ...). ``server_fields`` keeps them for the episode as verl's own
tool agent loop does (the first turn's fields; ``max_global_steps`` from the latest turn): verl's v1
trainer reads the episode's min/max versions from every sample, as integers, each step.
"""

from __future__ import annotations

from typing import Any, Protocol
from uuid import uuid4

from deepresearcher.errors import GenerationError
from deepresearcher.generate.base import GenerationResult, SamplingParams


class TurnAborted(GenerationError):
    """verl aborted a turn for a weight sync and will not resume it (``async_training.partial_rollout: false``):
    the episode cannot be finished, and verl's rule is to drop it."""


class TokenServer(Protocol):
    """What this adapter needs of verl's ``LLMServerClient`` (its ``generate`` coroutine)."""

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any: ...


class ServerManagerGenerator:
    """One episode's generator over verl's server manager (built per episode: it holds the request id)."""

    exact_tokens = True

    def __init__(self, server: TokenServer, sampling_params: dict[str, Any], request_id: str | None = None) -> None:
        """``sampling_params``: what verl's worker passed to the agent loop's ``run`` for this sample."""
        self.server = server
        self.sampling_params = dict(sampling_params)
        self.request_id = request_id or uuid4().hex
        self.calls = 0
        self.server_fields: dict[str, Any] = {}

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        request = {**self.sampling_params, "max_tokens": params.max_tokens, "stop": list(params.stop)}
        self.calls += 1
        output = await self.server.generate(self.request_id, prompt_ids=list(prompt_ids), sampling_params=request)
        self._keep_server_fields(dict(output.extra_fields or {}))
        if output.stop_reason in ("aborted", "abort"):  # vLLM's and SGLang's spelling
            raise TurnAborted(f"verl aborted request {self.request_id} (turn {self.calls}) and did not resume it.")
        ids = list(output.token_ids)
        if len(ids) > params.max_tokens:
            raise GenerationError(f"verl's server returned {len(ids)} tokens for max_tokens={params.max_tokens}.")
        logprobs = list(output.log_probs) if output.log_probs is not None else None
        if logprobs is not None and len(logprobs) != len(ids):
            raise GenerationError(f"verl's server returned {len(logprobs)} logprobs for {len(ids)} tokens.")
        finish = "length" if len(ids) == params.max_tokens else "stop"
        return GenerationResult(token_ids=ids, logprobs=logprobs, finish_reason=finish)

    def _keep_server_fields(self, fields: dict[str, Any]) -> None:
        """The episode's server fields: the first turn's, with the newest weights version seen since."""
        if not self.server_fields:
            self.server_fields.update(fields)
        elif fields.get("max_global_steps") is not None:
            self.server_fields["max_global_steps"] = fields["max_global_steps"]

    async def aclose(self) -> None:
        """The server manager belongs to verl's worker; nothing to close here."""
