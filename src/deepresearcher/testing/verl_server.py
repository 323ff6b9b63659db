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

One level down, for verl's asynchronous modes, :class:`WeightSyncTokenServer` stands in for the vLLM server
*behind* verl's real client (``FullyAsyncLLMServerClient``, which resumes aborted turns): it is aborted and
resumed around a weight sync as vLLM is; :class:`LocalActor` gives an object in this process the calling
convention of a Ray actor handle, for verl's client and load balancer in a single-process test.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass
class _Episode:
    """One episode as the server tells it apart: by the tokens it has seen (verl's client sends a fresh request
    id per turn), its question and its scripted replies."""

    question: str
    generator: ScriptedGenerator
    seen: list[int]
    turns: int = 0


class WeightSyncTokenServer:
    """One rollout server replica as verl's asynchronous trainers drive it around a weight sync.

    verl's ``CheckpointEngineManager.update_weights`` aborts every request in flight
    (``abort_all_requests``: vLLM pauses and returns each one's tokens so far with ``stop_reason="aborted"``),
    loads the new weights, then ``resume_generation``; requests arriving in between wait at the closed gate.
    This stand-in does the same over scripted replies, answering the call verl's client makes
    (``generate(request_id=, prompt_ids=, sampling_params=, ...)`` → ``TokenOutput`` with the weights version
    in ``extra_fields``, as ``vLLMHttpServer.generate``):

    - ``scripts``: per question, the replies of each episode variant; a prompt that continues no episode it
      has served starts the question's next variant, any other continues the episode whose tokens it extends
      (verl's client sends a fresh request id each turn, so tokens are all a server can go by);
    - a reply is produced one token per event-loop step, so a sync can land in the middle of a turn;
      ``hold(question, turn, after)`` stops that turn of the question's first episode after ``after`` tokens
      until the next abort (``held`` is set when it gets there);
    - a request whose prompt is an aborted turn's prompt plus its tokens continues that turn with the rest of
      the same reply: what vLLM samples from that prefix under the new weights, here the scripted text;
    - logprobs (when asked) are ``scripted_logprob`` of each token's position in its whole turn.

    It records every request (``requests``) and the questions of the turns it aborted (``aborted``).
    """

    def __init__(self, tokenizer: Any, scripts: dict[str, list[list[str]]], *, global_steps: int = 0) -> None:
        import asyncio

        self.tokenizer, self.scripts = tokenizer, scripts
        self.global_steps = global_steps
        self.requests: list[dict[str, Any]] = []
        self.aborted: list[str] = []
        self.held = asyncio.Event()
        self._open = asyncio.Event()
        self._open.set()
        self._in_flight: set[Any] = set()
        self._episodes: list[_Episode] = []
        self._unfinished: dict[tuple[int, ...], tuple[_Episode, list[int], int]] = {}  # prompt + tokens → rest
        self._hold: tuple[str, int, int] | None = None

    def hold(self, question: str, turn: int, after: int) -> None:
        self._hold = (question, turn, after)

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def abort_all_requests(self, **kwargs: Any) -> dict[str, Any]:
        self._open.clear()
        for aborted in list(self._in_flight):
            aborted.set()
        return {"aborted_count": len(self._in_flight)}

    async def resume_generation(self) -> None:
        self._open.set()

    def _episode_of(self, prompt_ids: list[int]) -> _Episode:
        """The episode this prompt continues (the longest whose tokens it extends by a turn), or a new one: a
        group's episodes all start from the same prompt."""
        known = [e for e in self._episodes if len(prompt_ids) > len(e.seen) and prompt_ids[:len(e.seen)] == e.seen]
        if known:
            return max(known, key=lambda e: len(e.seen))
        text = self.tokenizer.decode(prompt_ids)
        question = next((q for q in self.scripts if q in text), None)
        if question is None:
            raise AssertionError(f"No script for the prompt {text[-200:]!r}")
        variants = self.scripts[question]
        started = sum(1 for e in self._episodes if e.question == question)
        episode = _Episode(question, ScriptedGenerator(self.tokenizer, variants[started % len(variants)]), prompt_ids)
        self._episodes.append(episode)
        return episode

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        import asyncio

        from verl.workers.rollout.replica import TokenOutput

        await self._open.wait()  # parked while the weights are being synced
        prompt_ids = list(prompt_ids)
        if tuple(prompt_ids) in self._unfinished:
            episode, ids, offset = self._unfinished.pop(tuple(prompt_ids))
            turn = -1  # a resumed turn is never held again
        else:
            episode = self._episode_of(prompt_ids)
            params = SamplingParams(max_tokens=sampling_params["max_tokens"], stop=sampling_params.get("stop") or [])
            ids, offset = (await episode.generator.generate(prompt_ids, params)).token_ids, 0
            turn, episode.turns = episode.turns, episode.turns + 1
        self.requests.append({"request_id": request_id, "question": episode.question, "prompt_ids": prompt_ids,
                              "global_steps": self.global_steps, **sampling_params})
        first = next(e for e in self._episodes if e.question == episode.question)
        hold_after = (self._hold[2] if self._hold is not None and episode is first
                      and self._hold[:2] == (episode.question, turn) else None)
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
            self.aborted.append(episode.question)
            self._unfinished[tuple(prompt_ids + produced)] = (episode, ids[len(produced):], offset + len(produced))
        else:
            episode.seen = prompt_ids + produced
        logprobs = [scripted_logprob(offset + i) for i in range(len(produced))] if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=produced, log_probs=logprobs, stop_reason=stop_reason, num_preempted=0,
                           extra_fields={"global_steps": self.global_steps, "num_cached_tokens": 0})
