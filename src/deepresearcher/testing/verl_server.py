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


class LocalActor:
    """A Ray actor handle's calling convention (``handle.method.remote(...)``, awaited) over an object in this
    process, so verl's client code that talks to its load balancer and servers runs unchanged without a Ray
    cluster. Coroutine methods run as tasks; plain ones run at once (verl calls some fire-and-forget)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        import asyncio
        import inspect
        from types import SimpleNamespace

        method = getattr(self._target, name)

        def remote(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if inspect.iscoroutine(result):
                return asyncio.ensure_future(result)
            done = asyncio.get_running_loop().create_future()
            done.set_result(result)
            return done

        return SimpleNamespace(remote=remote)


class WeightSyncTokenServer:
    """One rollout server replica as verl's asynchronous trainers drive it around a weight sync.

    verl's ``CheckpointEngineManager.update_weights`` aborts every request in flight
    (``abort_all_requests``: vLLM pauses and returns each one's tokens so far with ``stop_reason="aborted"``),
    loads the new weights, then ``resume_generation``; requests arriving in between wait at the closed gate.
    This stand-in does the same over scripted replies (``ScriptedGenerator``), answering the call verl's
    client makes (``generate(request_id=, prompt_ids=, sampling_params=, ...)`` → ``TokenOutput``):

    - a reply is produced one token per event-loop step, so a sync can land in the middle of a turn;
      ``hold(key, turn, after)`` stops that turn of the episode whose script ``key`` is picked after
      ``after`` tokens until the next abort (``held`` is set when it gets there);
    - a request whose prompt is an aborted turn's prompt plus its tokens continues that turn with the rest of
      the same reply: what vLLM samples from that prefix under the new weights, here the scripted text;
    - logprobs (when asked) are ``scripted_logprob`` of each token's position in its whole turn.

    It records every request (``requests``) and the script keys of the turns it aborted (``aborted``).
    """

    def __init__(self, generator: ScriptedGenerator, key_of: Any, *, global_steps: int = 0) -> None:
        import asyncio

        self.generator, self.key_of = generator, key_of
        self.global_steps = global_steps
        self.requests: list[dict[str, Any]] = []
        self.aborted: list[str] = []
        self.held = asyncio.Event()
        self._open = asyncio.Event()
        self._open.set()
        self._in_flight: set[Any] = set()
        self._unfinished: dict[tuple[int, ...], tuple[list[int], int]] = {}  # prompt + tokens → rest, offset
        self._turns: dict[str, int] = {}
        self._hold: tuple[str, int, int] | None = None

    def hold(self, key: str, turn: int, after: int) -> None:
        self._hold = (key, turn, after)

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def abort_all_requests(self, **kwargs: Any) -> dict[str, Any]:
        self._open.clear()
        for aborted in list(self._in_flight):
            aborted.set()
        return {"aborted_count": len(self._in_flight)}

    async def resume_generation(self) -> None:
        self._open.set()

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        import asyncio

        from verl.workers.rollout.replica import TokenOutput

        await self._open.wait()  # parked while the weights are being synced
        prompt_ids = list(prompt_ids)
        key = self.key_of(prompt_ids)
        self.requests.append({"request_id": request_id, "key": key, "prompt_ids": prompt_ids, **sampling_params})
        if tuple(prompt_ids) in self._unfinished:
            ids, offset = self._unfinished.pop(tuple(prompt_ids))
            turn = -1  # a resumed turn is never held again
        else:
            params = SamplingParams(max_tokens=sampling_params["max_tokens"], stop=sampling_params.get("stop") or [])
            ids, offset = (await self.generator.generate(prompt_ids, params)).token_ids, 0
            turn = self._turns[key] = self._turns.get(key, -1) + 1
        hold_after = self._hold[2] if self._hold is not None and self._hold[:2] == (key, turn) else None
        aborted = asyncio.Event()
        self._in_flight.add(aborted)
        produced: list[int] = []
        try:
            for token in ids:
                if len(produced) == hold_after:
                    self.held.set()
                    await aborted.wait()
                if aborted.is_set():
                    break
                produced.append(token)
                await asyncio.sleep(0)
        finally:
            self._in_flight.discard(aborted)
        stop_reason = "completed"
        if len(produced) < len(ids):
            stop_reason = "aborted"
            self.aborted.append(key)
            self._unfinished[tuple(prompt_ids + produced)] = (ids[len(produced):], offset + len(produced))
        logprobs = [scripted_logprob(offset + i) for i in range(len(produced))] if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=produced, log_probs=logprobs, stop_reason=stop_reason, num_preempted=0,
                           extra_fields={"global_steps": self.global_steps, "num_cached_tokens": 0})
